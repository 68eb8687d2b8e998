"""Task pass rates: pass@k estimators, intervals, and the keep/drop/inspect label per task."""
