"""The one judge factory (JudgeSpec, build_judge), the one dispatch path (grading/dispatch.py), the one wrapper of
a failed check (checks.registry.attempt_check) and the one "path or inline text" rule (input_files.looks_like_path)."""
from __future__ import annotations

import argparse
import json

import pytest
from rubric_fakes import ScriptedJudge, always, trajectory, yaml_text

import rubrics
from rubrics.grading.dispatch import JudgeCall, group_by_judge, split_back
from rubrics.judges.cache.cached import CachedJudge
from rubrics.judges.factory import JudgeSpec, build_judge
from rubrics.judges.backends.none import NoJudge
from rubrics.judges.panel.judge import PanelJudge
from rubrics.judges.protocol import Verdict
from rubrics.rubric.load import load_rubric

PANEL_RUBRIC = yaml_text("""
    version: 1
    id: p
    task: t
    judge:
      calibration: cal/c.json
      panel: {members: ["openai:http://127.0.0.1:9/v1:a", "openai:http://127.0.0.1:9/v1:b"], combine: majority}
    criteria:
      - {id: c, points: 1, judge: the answer is clear}
""")


def grade_flags(**given) -> argparse.Namespace:
    flags = dict(judge=None, panel_member=[], panel_combine=None, model=None, method=None, quantization=None,
                 base_url=None, calibration=None, cache=None, no_cache=True)
    return argparse.Namespace(**{**flags, **given})


def test_a_rubrics_judge_section_fills_a_spec_and_equal_settings_make_equal_specs(tmp_path):
    path = tmp_path / "rubric.yaml"
    path.write_text(PANEL_RUBRIC)
    spec = JudgeSpec.from_rubric(load_rubric(path))
    assert spec == JudgeSpec("panel", members=("openai:http://127.0.0.1:9/v1:a", "openai:http://127.0.0.1:9/v1:b"),
                             combine="majority", calibration=tmp_path / "cal" / "c.json", rubric_members=True)
    assert hash(spec) == hash(JudgeSpec.from_rubric(load_rubric(path)))
    assert JudgeSpec.from_rubric(None) == JudgeSpec()   # no judge: section: the embedded judge, its own calibration


def test_flags_over_the_rubric_and_what_they_refuse(tmp_path):
    path = tmp_path / "rubric.yaml"
    path.write_text(PANEL_RUBRIC)
    rubric = load_rubric(path)
    with pytest.raises(ValueError, match="--panel-member needs --judge panel"):
        JudgeSpec.from_args(grade_flags(panel_member=["embedded", "embedded"]), rubric)
    # --judge none loads no calibration (the rubric's file does not exist), and a missing one is refused otherwise
    assert JudgeSpec.from_args(grade_flags(judge="none"), rubric) == JudgeSpec("none")
    with pytest.raises(ValueError, match="c.json: cannot read the calibration file"):
        JudgeSpec.from_args(grade_flags(), rubric)
    with pytest.raises(ValueError, match="other.json: cannot read the calibration file"):
        JudgeSpec.from_args(grade_flags(calibration=str(tmp_path / "other.json")), rubric)   # --calibration first
    spec = JudgeSpec.from_args(grade_flags(judge="openai", base_url="http://h/v1", model="m", method="choice"))
    assert (spec.kind, spec.base_url, spec.model, spec.method, spec.combine, spec.cache) == \
        ("openai", "http://h/v1", "m", "choice", "mean_logit", None)
    cached = JudgeSpec.from_args(grade_flags(judge="embedded", no_cache=False, cache=str(tmp_path / "v.sqlite")))
    assert str(cached.cache.path) == str(tmp_path / "v.sqlite")
    # a command without --no-cache (judge-eval) has no verdict cache
    assert JudgeSpec.from_args(argparse.Namespace(judge="embedded", panel_member=[])).cache is None


def test_build_judge_builds_each_kind_and_a_panel_caches_every_member(tmp_path):
    from rubrics.judges.cache.verdict_cache import VerdictCache

    assert isinstance(build_judge(JudgeSpec("none")), NoJudge)
    with pytest.raises(ValueError, match="judge: expected one of embedded, openai, panel, none, got 'vibes'"):
        build_judge(JudgeSpec("vibes"))
    cache = VerdictCache(tmp_path / "v.sqlite")
    judge = build_judge(JudgeSpec("openai", base_url="http://127.0.0.1:9/v1", model="m", cache=cache))
    assert isinstance(judge, CachedJudge) and judge.name == "openai:m" and judge.cache is cache
    timed = build_judge(JudgeSpec("openai", base_url="http://127.0.0.1:9/v1", options={"timeout": 5.0}))
    assert timed.timeout == 5.0 and timed.name == "openai:served-model"   # options: other constructor keywords
    panel = build_judge(JudgeSpec("panel", members=("openai:http://127.0.0.1:9/v1:a", "openai:http://127.0.0.1:9/v1"),
                                  combine="majority", cache=cache))
    assert isinstance(panel, PanelJudge) and panel.name == ("panel[majority](openai:http://127.0.0.1:9/v1:a, "
                                                            "openai:http://127.0.0.1:9/v1)")
    assert all(isinstance(member.judge, CachedJudge) for member in panel.members)
    with pytest.raises(ValueError, match="panel member 'embedded:vibes': unknown method"):
        build_judge(JudgeSpec("panel", members=("embedded:vibes", "embedded")))


def test_score_builds_one_default_judge_per_rubric_judge_setting(monkeypatch):
    from rubrics.judges import factory

    built = []

    def fake(spec):
        built.append(spec)
        return always(True)

    monkeypatch.setattr(factory, "build_judge", fake)
    rubric = PANEL_RUBRIC.replace("  calibration: cal/c.json\n", "")
    results = rubrics.score_many([trajectory("x", id="1"), trajectory("y", id="2")], rubric)
    assert [r.score for r in results] == [1.0, 1.0] and built == [JudgeSpec.from_rubric(load_rubric(rubric))]


class Asker:
    def __init__(self, judge, *requests):
        self.judge, self.requests = judge, list(requests)


def test_requests_are_grouped_by_judge_in_job_order_and_split_back():
    a, b = ScriptedJudge(), ScriptedJudge()
    jobs = [Asker(a, "a1", "a2"), Asker(b, "b1"), Asker(None), Asker(a, "a3")]
    calls = group_by_judge(jobs)
    assert [(c.judge, c.requests) for c in calls] == [(a, ["a1", "a2", "a3"]), (b, ["b1"])]
    assert all(isinstance(c, JudgeCall) for c in calls)
    verdicts = split_back(jobs, calls, [[f"v-{r}" for r in c.requests] for c in calls])
    assert verdicts == [["v-a1", "v-a2"], ["v-b1"], [], ["v-a3"]]


RUBRIC = yaml_text("""
    version: 1
    id: r
    task: t
    criteria:
      - {id: c, points: 1, contains: {text: x}}
      - {id: nested, points: 1, all_of: [{contains: {text: x}}]}
""")


@pytest.mark.parametrize("behaviour, top, nested", [
    ("crash", "internal error in check 'contains': ZeroDivisionError: bug",
     "check 'all_of' failed: check 'contains' crashed: ZeroDivisionError: bug"),
    ("check-error", "check 'contains' failed: grader broke", "check 'all_of' failed: grader broke"),
    ("not-an-outcome", "check 'contains' failed: check 'contains' returned NoneType, not a CheckOutcome",
     "check 'all_of' failed: check 'contains' returned NoneType, not a CheckOutcome"),
])
def test_a_failed_check_is_wrapped_once_on_every_path(monkeypatch, behaviour, top, nested):
    from rubrics.checks.base import CheckError
    from rubrics.checks.text import ContainsCheck

    def run(self, config, traj):
        if behaviour == "crash":
            raise ZeroDivisionError("bug")
        if behaviour == "check-error":
            raise CheckError("grader broke")
        return None

    monkeypatch.setattr(ContainsCheck, "run", run)
    items = {i.id: i for i in rubrics.score(trajectory("x"), RUBRIC).items}
    assert (items["c"].status, items["c"].error) == ("error", top)
    assert (items["nested"].status, items["nested"].error) == ("error", nested)


def test_path_or_inline_text(tmp_path):
    from rubrics.input_files import fits_a_path, looks_like_path

    file = tmp_path / "t.json"
    file.write_text("{}")
    assert looks_like_path(str(file)) and not looks_like_path(str(tmp_path / "missing.json"))
    assert looks_like_path("missing.yaml", (".yaml", ".yml"), yaml=True)   # a rubric name: read, and refused there
    assert not looks_like_path("id: x.yaml", (".yaml",), yaml=True) and not looks_like_path(" r.yaml", (".yaml",),
                                                                                              yaml=True)
    assert not looks_like_path("a\nb.yaml", (".yaml",)) and not looks_like_path("x" * 5000 + ".yaml", (".yaml",))
    assert not looks_like_path("x" * 300) and not looks_like_path("a\0b") and not looks_like_path("")
    assert fits_a_path("") and fits_a_path("id: x") and not fits_a_path("a\nb")
    # a compact JSON rubric of one long line is text, not a name too long for the system
    compact = json.dumps({"version": 1, "id": "r", "task": "t" * 300,
                          "criteria": [{"id": "c", "points": 1, "contains": {"text": "x"}}]}, separators=(",", ":"))
    assert load_rubric(compact).task == "t" * 300
