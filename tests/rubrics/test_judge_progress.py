"""The judging progress of `rubric grade`: the hook judges call, the bar, the plain lines of a piped stderr, the summary
line, and what the embedded judge reports on the real engine."""
from __future__ import annotations

import warnings

import pytest

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


class FakeClock:
    def __init__(self, now: float = 100.0):
        self.now = now

    def __call__(self) -> float:
        return self.now


def test_piped_stderr_gets_a_plain_line_at_most_every_interval_with_the_time_left(capsys):
    from rubrics.cli.judge_progress import PLAIN_LINE_INTERVAL_S

    assert PLAIN_LINE_INTERVAL_S == 10.0
    clock, judge = FakeClock(), ProgressJudge()
    with judge_progress(judge, show_bar=False, clock=clock):
        clock.now += 5                               # the model loads
        judge.progress(0, 9, {})                     # judging starts at 105
        for step in range(1, 26):                    # 50 s of prefill, 2 s a step: no verdict yet
            clock.now += 2
            judge.progress(0, 9, {"prefix_cache_hit_rate": 0.5}, work=step / 50)
        for done in range(1, 10):                    # then the verdicts, all in the last seconds
            clock.now += 0.5
            judge.progress(done, 9, {"prefix_cache_hit_rate": 0.5}, work=1.0)
    lines = capsys.readouterr().err.splitlines()
    progress_lines = [line for line in lines if line.startswith("judging (")]
    # at 115, 125, 135, 145, 155 (the verdicts' 4.5 s come before the next interval)
    assert len(progress_lines) == 5 and len(lines) == 6
    # at 115: 10% of the prompt work = 0.9 judgments' worth in 10 s; 8.1 left at 0.09/s
    assert progress_lines[0] == \
        "judging (10s): 0/9 verdicts, 10% of prompt tokens, 0.09 judgments/s, about 1m30s left"
    assert progress_lines[-1].startswith("judging (50s): 0/9 verdicts, 50% of prompt tokens")
    assert lines[-1].startswith("judged 9 items in 54.5s (0.17 judgments/s) after 5.0s starting the judge")


def test_a_judge_reporting_verdicts_alone_gets_lines_without_the_prompt_share(capsys):
    clock, judge = FakeClock(), ProgressJudge()
    with judge_progress(judge, show_bar=False, clock=clock):
        judge.progress(0, 4, {})
        for done in range(1, 5):
            clock.now += 6
            judge.progress(done, 4, {})   # progress(done, total, stats): the protocol before work existed
    lines = capsys.readouterr().err.splitlines()
    assert lines[0] == "judging (12s): 2/4 verdicts, 0.17 judgments/s, about 12s left"
    assert lines[1] == "judging (24s): 4/4 verdicts, 0.17 judgments/s"     # nothing left to wait for
    assert lines[2].startswith("judged 4 items in 24.0s")


def test_a_long_wait_between_reports_still_prints_lines(capsys, monkeypatch):
    """One engine step of a slow CPU can take minutes: the lines keep coming while it runs."""
    import time

    from rubrics.cli import judge_progress as module

    monkeypatch.setattr(module, "PLAIN_LINE_INTERVAL_S", 0.2)
    judge = ProgressJudge()
    with judge_progress(judge, show_bar=False):
        judge.progress(0, 4, {}, work=0.0)
        time.sleep(0.9)                     # no report: the first step runs
        judge.progress(4, 4, {}, work=1.0)
    lines = capsys.readouterr().err.splitlines()
    waiting = [line for line in lines if line.endswith(": 0/4 verdicts, 0% of prompt tokens, 0.00 judgments/s")]
    assert len(waiting) >= 2 and lines[-1].startswith("judged 4 items"), lines


def test_a_second_batch_adds_on_and_the_bar_shows_the_work_and_time_left(capsys, monkeypatch):
    from rubrics.cli.judge_progress import JudgingProgress

    progress = JudgingProgress(opened=0.0)
    progress.report(0, 4, {}, None, now=1.0)
    progress.report(4, 4, {}, 1.0, now=9.0)
    progress.report(0, 2, {}, None, now=9.0)         # a group's comparisons after its verdicts
    progress.report(0, 2, {}, 0.5, now=11.0)
    assert (progress.judged, progress.planned, progress.progressed) == (4, 6, 5.0)
    assert progress.rate(11.0) == 0.5 and progress.seconds_left(11.0) == 2.0
    monkeypatch.setenv("COLUMNS", "80")   # a narrow terminal: the bar shrinks, the figures stay whole
    clock, judge = FakeClock(), ProgressJudge()
    with judge_progress(judge, show_bar=True, clock=clock):
        judge.progress(0, 4, {"prefix_cache_hit_rate": 0.25})
        clock.now += 30
        judge.progress(1, 4, {"prefix_cache_hit_rate": 0.25}, work=0.5)
    err = capsys.readouterr().err
    bar = err.splitlines()[0]
    assert "…" not in bar and "━" in bar, err
    # 2 judgments' worth of 4 in 30 s
    for text in (" 1/4 ", "50% tokens", "0.07 judgments/s", "cache 25%", "30s left"):
        assert text in bar, err


def test_durations_read_as_a_person_says_them():
    from rubrics.cli.judge_progress import duration_text, time_left_text

    assert [duration_text(s) for s in (0.4, 45, 130, 3600 + 5 * 60 + 9)] == ["0s", "45s", "2m10s", "1h05m"]
    assert time_left_text(None) == "" and time_left_text(61) == "about 1m01s left"


# -- the embedded judge, on the real engine -----------------------------------------------------------------

@pytest.fixture(scope="module")
def tiny_judge(tmp_path_factory):
    from judge_models import tiny_judge_model

    from rubrics.judges.backends.embedded import EmbeddedJudge
    from rubrics.judges.fitted.judge_models import UncalibratedJudgeWarning

    folder = tiny_judge_model(str(tmp_path_factory.mktemp("judge-model")))
    with warnings.catch_warnings():   # a random model has no calibration, and needs none here
        warnings.simplefilter("ignore", UncalibratedJudgeWarning)
        # a small step budget: the batch's prefill takes many engine steps, as long prompts do on a real model
        return EmbeddedJudge(model=str(folder), method="choice", max_num_batched_tokens=64)


def test_the_embedded_judge_reports_prompt_work_before_any_verdict(tiny_judge):
    import rubrics
    from judge_models import CFO_RUBRIC, cfo_trajectory_paths

    calls: list[tuple] = []
    tiny_judge.progress = lambda done, total, stats, work=None: calls.append((done, total, work))
    try:
        rubrics.score_many(cfo_trajectory_paths()[:2], CFO_RUBRIC, judge=tiny_judge)
    finally:
        tiny_judge.progress = None
    total = calls[0][1]
    assert calls[0] == (0, total, 0.0) and {c[1] for c in calls} == {total}     # judging starts: nothing done
    before_verdicts = [work for done, _, work in calls[1:] if done == 0]
    assert len([w for w in before_verdicts if 0 < w < 1]) >= 3                    # the bar moves meanwhile
    works = [work for _, _, work in calls]
    dones = [done for done, _, _ in calls]
    assert works == sorted(works) and dones == sorted(dones)
    assert calls[-1] == (total, total, 1.0)


def test_a_progress_written_for_three_arguments_hears_of_verdicts_alone(tiny_judge):
    import rubrics
    from judge_models import CFO_RUBRIC, cfo_trajectory_paths

    calls: list[tuple] = []
    tiny_judge.progress = lambda done, total, stats: calls.append((done, total))
    try:
        results = rubrics.score_many(cfo_trajectory_paths()[2:4], CFO_RUBRIC, judge=tiny_judge)
    finally:
        tiny_judge.progress = None
    assert all(r.complete for r in results)
    total = calls[0][1]
    assert calls[0] == (0, total) and calls[-1] == (total, total) and len(calls) == total + 1


def test_piped_progress_lines_from_the_embedded_judge(tiny_judge, capsys):
    """judge_progress over the real judge, stderr not a terminal: a clock that moves 4 s per reading stands for a
    slow machine, so the plain lines come."""
    import rubrics
    from judge_models import CFO_RUBRIC, cfo_trajectory_paths

    clock = FakeClock()

    def slow_clock() -> float:
        clock.now += 4
        return clock.now

    with judge_progress(tiny_judge, show_bar=False, clock=slow_clock):
        rubrics.score_many(cfo_trajectory_paths()[4:6], CFO_RUBRIC, judge=tiny_judge)
    lines = capsys.readouterr().err.splitlines()
    progress_lines = [line for line in lines if line.startswith("judging (")]
    assert progress_lines and "% of prompt tokens" in progress_lines[0] and " left" in progress_lines[0]
    assert lines[-1].startswith("judged ")


def test_the_embedded_judge_steps_the_cpu_engine_in_small_prompt_budgets_unless_told(tmp_path):
    """On the CPU the judge's engine takes CPU_STEP_TOKENS per step, so the prompt work of the quickstart's batch
    (about 1,800 computed tokens) arrives in several steps and the bar moves; an explicit budget, or a CUDA device,
    keeps its own."""
    import warnings

    from judge_models import tiny_judge_model

    from rubrics.judges.backends.embedded import CPU_STEP_TOKENS, EmbeddedJudge, engine_defaults
    from rubrics.judges.fitted.judge_models import UncalibratedJudgeWarning

    assert CPU_STEP_TOKENS < 2048
    assert engine_defaults({})["max_num_batched_tokens"] == CPU_STEP_TOKENS
    assert engine_defaults({"max_num_batched_tokens": 4096})["max_num_batched_tokens"] == 4096
    assert "max_num_batched_tokens" not in engine_defaults({"device": "cuda"})
    folder = tiny_judge_model(str(tmp_path / "judge-model"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UncalibratedJudgeWarning)
        judge = EmbeddedJudge(model=str(folder), method="choice")
    assert judge.llm.engine.config.max_num_batched_tokens == CPU_STEP_TOKENS
