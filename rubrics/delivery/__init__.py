"""Tooling a vendor and a lab run on a delivery of task folders: folder checks, held-out split, report.

Calibration of graded attempts lives in `rubrics.calibration`. Submodules are imported directly
(`from rubrics.delivery.split import split_delivery`) so that `import rubrics` stays light.
"""
