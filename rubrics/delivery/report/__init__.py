"""The delivery report: report.md, report.json, the pass-rate chart and the uplift comparison."""
