"""`rubric view`: a local page to look at grading results (run, trajectory, compare and judge-evaluation views).

results_file reads result lines (bad lines become problems with their line numbers), judge_eval_file reads
`rubric judge-eval --json` output, trajectories and evidence_marks lay trajectories out with the parts an item's
evidence came from, compare pairs two runs, page_model gathers it all, render writes the one self-contained HTML
page (assets/ holds its hand-written script and CSS) and server serves it on 127.0.0.1.
"""
