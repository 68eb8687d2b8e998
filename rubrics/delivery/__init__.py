"""Tooling a vendor and a lab run on a delivery of task folders, one subpackage per stage: `tasks/` (the folders
and their check), `sandbox/` (where grade.sh runs), `runs/` (attempts graded against hidden tests), `split/` (the
held-out split), `pass_rates/` (how often a model solves each task, and the keep/drop/inspect label), `report/`.
Submodules are imported directly (`from rubrics.delivery.split.heldout import plan_split`) so that `import rubrics`
stays light.
"""
