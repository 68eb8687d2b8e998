"""The judging progress hook of `rubric grade`: the bar's callback and the summary line."""
from __future__ import annotations

from rubrics.cli.judge_progress import judge_progress, summary_line


class ProgressJudge:
    name = "fake"

    def __init__(self):
        self.progress = None

    def run_batch(self, total: int) -> None:
        for done in range(1, total + 1):
            self.progress(done, total, {"prefix_cache_hit_rate": 0.9, "prompt_tokens": 1000,
                                        "computed_prompt_tokens": 100})


def test_the_hook_is_attached_during_the_block_and_a_summary_follows(capsys):
    judge = ProgressJudge()
    with judge_progress(judge, show_bar=True):
        assert callable(judge.progress)
        judge.run_batch(4)
    assert judge.progress is None
    err = capsys.readouterr().err
    assert "judged 4 items" in err and "prefix cache hit rate 90%" in err and "computed 100 of 1000" in err


def test_judges_without_progress_and_empty_batches_print_nothing(capsys):
    with judge_progress(object()):
        pass
    with judge_progress(ProgressJudge(), show_bar=False):
        pass
    assert capsys.readouterr().err == ""


def test_summary_line_rate():
    assert summary_line(10, 4.0, {}).startswith("judged 10 items in 4.0s (2.50 judgments/s), prefix")
    assert summary_line(10, 4.0, {}, setup_s=2.5).startswith(
        "judged 10 items in 4.0s (2.50 judgments/s) after 2.5s starting the judge, prefix")


def test_the_clock_starts_when_the_judge_says_judging_starts(capsys):
    """Time spent before the judge's first (0 done) call, e.g. loading its model, is not judging time."""
    import time

    judge = ProgressJudge()
    with judge_progress(judge, show_bar=False):
        time.sleep(0.3)  # the model loads
        judge.progress(0, 4, {})
        judge.run_batch(4)
    err = capsys.readouterr().err
    seconds = float(err.split(" items in ")[1].split("s ")[0])
    assert seconds < 0.25 and "starting the judge" in err, err
