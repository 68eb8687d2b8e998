"""Agreement of a judge with human labels: the numbers behind `rubric judge-eval` (and benchmarks/judge_quality.py).

    labels.py            the labels files, and the judge's verdicts on them (every labelled trajectory graded once)
    metrics.py           accuracy, balanced accuracy, Cohen's kappa, Brier, by difficulty, same-item pairs, panels
    cross_validation.py  per-item thresholds and a method's calibration, fitted in-sample and held out (leaving
                         each trajectory or each domain out, or on a fixed split), and the method's calibration as
                         shipped
    split.py             the fixed split of labelled domains into training and held-out ones
    head_training.py     a verdict head fitted on the judge model's hidden states (rubric judge-train)
    rendering.py         the text report

Every name is here too: `from rubrics import judge_eval as je; je.judge_labels(je.load_labels(path), rubric, judge)`.
"""

from rubrics.judge_eval.cross_validation import (as_shipped, calibrate, cross_validated, domain_report,
                                                 fit_calibration, fit_thresholds, leave_one_domain_out, recalibrated,
                                                 split_report, summary_with_domains)
from rubrics.judge_eval.labels import (DIFFICULTIES, ExamplesRemoved, Judged, Label, LabelsError, judge_labels,
                                      load_labels)
from rubrics.judge_eval.metrics import (Agreement, EvalReport, agreement, by_difficulty, cohen_kappa, evaluate,
                                        panel_report, ranked_pairs, report_dict, summary)
from rubrics.judge_eval.rendering import render, render_domain_report, render_panel, render_report
from rubrics.judge_eval.split import LabelSplit, SplitError, load_split

__all__ = ["DIFFICULTIES", "Agreement", "EvalReport", "ExamplesRemoved", "Judged", "Label", "LabelSplit", "LabelsError",
           "SplitError", "agreement", "load_split", "split_report", "summary_with_domains",
           "as_shipped", "by_difficulty", "calibrate", "cohen_kappa", "cross_validated", "domain_report", "evaluate",
           "fit_calibration", "fit_thresholds", "judge_labels", "leave_one_domain_out", "load_labels", "panel_report",
           "ranked_pairs", "recalibrated", "render", "render_domain_report", "render_panel", "render_report",
           "report_dict", "summary"]
