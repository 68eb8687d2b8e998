"""The trust lifecycle: how well a judge agrees with human labels, and the fitted files that make it agree.

    lifecycle.py         the one entry point: what `rubric judge-eval`, `rubric judge-train`, the viewer's
                         judge-eval page and benchmarks/judge_quality.py call (labels judged, fits, heads trained,
                         the fitted and shipped files written)

    labels.py            the labels files, and the judge's verdicts on them (every labelled trajectory graded once)
    metrics.py           accuracy, balanced accuracy, Cohen's kappa, Brier, by difficulty, same-item pairs, panels
    cross_validation.py  per-item thresholds and a method's calibration, fitted in-sample and held out (leaving
                         each trajectory or each domain out, or on a fixed split), and the method's calibration as
                         shipped
    split.py             the fixed split of labelled domains into training and held-out ones
    head_training.py     a verdict head fitted on the judge model's hidden states (rubric judge-train)
    rendering.py         the text report
    export.py            the judge-eval file `rubric view` opens: one row per label, with the evidence read
    quality.py           the catalog's quality table (quality.json, `rubric model list`)

The fitted files themselves (calibration files, verdict heads, the shipped ones) are rubrics/judges/fitted/'s: the
judges read them at start-up, below this package, which runs judges on labels.

Every name is here too: `from rubrics import trust; trust.judge_labels(trust.load_labels(path), rubric, judge)`.
"""

from rubrics.trust.cross_validation import (as_shipped, calibrate, cross_validated, domain_report, fit_calibration,
                                            fit_thresholds, leave_one_domain_out, recalibrated, split_report,
                                            summary_with_domains)
from rubrics.trust.labels import (DIFFICULTIES, ExamplesRemoved, Judged, Label, LabelsError, judge_labels,
                                  load_labels)
from rubrics.trust.metrics import (Agreement, EvalReport, agreement, by_difficulty, cohen_kappa, evaluate,
                                   panel_report, ranked_pairs, report_dict, summary)
from rubrics.trust.rendering import render, render_domain_report, render_panel, render_report
from rubrics.trust.split import LabelSplit, SplitError, load_split

__all__ = ["DIFFICULTIES", "Agreement", "EvalReport", "ExamplesRemoved", "Judged", "Label", "LabelSplit", "LabelsError",
           "SplitError", "agreement", "load_split", "split_report", "summary_with_domains",
           "as_shipped", "by_difficulty", "calibrate", "cohen_kappa", "cross_validated", "domain_report", "evaluate",
           "fit_calibration", "fit_thresholds", "judge_labels", "leave_one_domain_out", "load_labels", "panel_report",
           "ranked_pairs", "recalibrated", "render", "render_domain_report", "render_panel", "render_report",
           "report_dict", "summary"]
