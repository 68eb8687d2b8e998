"""Properties: random rubrics, trajectories and YAML never crash the loader, scorer or linter, and the
scoring rule always holds."""
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rubric_fakes import ScriptedJudge

import rubrics
from rubrics.cli.main import main
from rubrics.judges import Verdict
from rubrics.rubric.load import analyze_rubric

SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])

scalars = st.one_of(st.none(), st.booleans(), st.integers(-5, 5), st.floats(allow_nan=False, width=16),
                    st.text(max_size=8), st.sampled_from(["final_answer", "emails", "*MIS*", "(", "48.2L", "0.5%"]))
json_like = st.recursive(scalars, lambda children: st.one_of(
    st.lists(children, max_size=3), st.dictionaries(st.text(max_size=6), children, max_size=3)), max_leaves=8)
check_keys = st.sampled_from(["judge", "email_sent", "number", "contains", "regex", "tool_called", "file", "json",
                              "tests", "all_of", "any_of", "not", "bogus"])
check_configs = st.one_of(
    json_like,
    st.fixed_dictionaries({"text": st.text(max_size=5)}, optional={"in": st.sampled_from(["final_answer", "nope"])}),
    st.fixed_dictionaries({"pattern": st.sampled_from(["a+", "(", "(\\d+)"])}),
    st.fixed_dictionaries({"label": st.just("total"), "expected": st.sampled_from(["5", "48.2L", "x", 3]),
                           "tolerance": st.sampled_from(["1%", "abc", 0.5])}),
    st.lists(st.dictionaries(st.sampled_from(["contains", "regex", "x"]), json_like, max_size=2), max_size=2),
)
items = st.builds(lambda base, key, config, extra: {**base, key: config, **extra},
                  st.fixed_dictionaries({"id": st.sampled_from(["a", "b", "c", "bad id", 3])},
                                        optional={"points": st.one_of(st.integers(-3, 3), scalars),
                                                  "text": scalars}),
                  check_keys, check_configs,
                  st.dictionaries(st.sampled_from(["evidence", "threshold", "examples", "extra"]), json_like, max_size=1))
rubric_docs = st.fixed_dictionaries(
    {"version": st.sampled_from([1, 1, 1, 2, "1"]), "id": st.sampled_from(["r", "bad id"]), "task": st.just("t")},
    optional={"gates": st.one_of(st.lists(items, max_size=3), json_like), "criteria": st.lists(items, max_size=4),
              "judge": json_like, "reference": scalars, "junk": json_like})

valid_checks = st.sampled_from([
    {"contains": {"text": "total"}}, {"regex": {"pattern": "\\d+"}}, {"judge": "states the total"},
    {"number": {"label": "total", "expected": 5, "tolerance": "1%"}}, {"file": {"path": "*.json"}},
    {"json": {"in": "files.a.json", "path": "a", "equals": 1}}, {"tool_called": {"name": "send_*", "max": 0}},
    {"email_sent": {"to": "cfo@acme.test"}}, {"tests": {"fail_to_pass": ["t::a"]}},
    {"any_of": [{"contains": {"text": "x"}}, {"not": {"regex": {"pattern": "y"}}}]},
    {"judge": {"text": "is clear", "mode": "reasoned", "threshold": 0.7}},
])


def _numbered(items: list[dict], prefix: str) -> list[dict]:
    return [{"id": f"{prefix}{i}", **item} for i, item in enumerate(items)]


mostly_valid_docs = st.builds(
    lambda gates, criteria, mutation: mutation({"version": 1, "id": "r", "task": "t",
                                                "gates": _numbered(gates, "g"), "criteria": _numbered(criteria, "c")}),
    st.lists(valid_checks, max_size=3),
    st.lists(st.builds(lambda check, points: {**check, "points": points}, valid_checks,
                       st.integers(-4, 4).filter(bool)), min_size=1, max_size=5),
    st.sampled_from([lambda d: d, lambda d: d, lambda d: d,
                     lambda d: {**d, "criteria": d["criteria"] + [{"id": "c0", "points": 1, "judge": "dup"}]},
                     lambda d: {**d, "gates": d["gates"] + [{"id": "gp", "points": 1, "judge": "x"}]},
                     lambda d: {**d, "criteria": [{**c, "points": 0} for c in d["criteria"]]}]))


@SETTINGS
@given(st.one_of(mostly_valid_docs, rubric_docs))
def test_random_rubrics_load_or_fail_with_a_clear_error(doc):
    try:
        rubric = rubrics.load_rubric(doc)
    except rubrics.RubricError as exc:
        assert exc.problems and all(p.message and p.code and p.severity == "error" for p in exc.problems)
    else:
        assert rubric.total > 0 and len({i.id for i in rubric.items}) == len(rubric.items)
        result = rubrics.score({"id": "t", "final_answer": "total 5", "state": {"files": {"a.json": "{}"}}},
                               rubric, judge=ScriptedJudge())
        assert 0.0 <= result.score <= 1.0 and len(result.items) == len(rubric.items)
    # the same document as YAML text: positions are then known for every problem
    text = yaml.safe_dump(doc, sort_keys=False)
    _, problems, _ = analyze_rubric(text)
    assert all(p.line >= 1 for p in problems)


valid_items = st.lists(st.tuples(st.sampled_from(["gate", "criterion"]), st.integers(-5, 5).filter(bool),
                                 st.booleans(), st.sampled_from(["met", "unmet", "error"])), min_size=1, max_size=8)


@SETTINGS
@given(valid_items)
def test_scoring_rule(specs):
    # Items whose outcome is fixed by the text: code items contain "yes"/"no"; judge items obey the judge.
    gates, criteria, outcome = [], [{"id": "anchor", "points": 1, "contains": {"text": "never-present"}}], {}
    for i, (kind, points, by_judge, status) in enumerate(specs):
        item_id = f"i{i}"
        check = {"judge": item_id} if by_judge or status == "error" else \
            {"contains": {"text": "YES" if status == "met" else "ABSENT"}}
        outcome[item_id] = status
        (gates if kind == "gate" else criteria).append({"id": item_id, **check, **({} if kind == "gate" else {"points": points})})
    doc = {"version": 1, "id": "r", "task": "t", "gates": gates, "criteria": criteria}
    judge = ScriptedJudge(lambda r: Verdict(met=None, probability=None, error="x") if outcome[r.item.id] == "error"
                          else Verdict(met=outcome[r.item.id] == "met", probability=0.5))
    result = rubrics.score({"id": "t", "final_answer": "YES"}, doc, judge=judge)
    assert 0.0 <= result.score <= 1.0
    assert result.total == sum(c["points"] for c in criteria if c["points"] > 0)
    statuses = {i.id: i.status for i in result.items}
    assert statuses == {**outcome, "anchor": "unmet"}                 # every item is reported
    assert result.earned == sum(c["points"] for c in criteria if statuses[c["id"]] == "met")
    gate_status = [statuses[g["id"]] for g in gates]
    if "unmet" in gate_status:
        assert result.gates_passed is False and result.score == 0.0
    else:
        assert result.gates_passed is (None if "error" in gate_status else True)
        assert result.score == max(0, result.earned) / result.total
    assert result.complete == ("error" not in statuses.values())


trajectories = st.one_of(json_like, st.fixed_dictionaries(
    {"id": st.one_of(st.text(max_size=4), st.integers())},
    optional={"messages": st.one_of(json_like, st.lists(st.fixed_dictionaries(
        {"role": st.sampled_from(["user", "assistant", "tool"]), "content": json_like}), max_size=3)),
              "final_answer": json_like, "state": json_like, "metadata": json_like}))


@SETTINGS
@given(st.lists(trajectories, max_size=3))
def test_random_trajectories_never_crash_the_scorer(trajs):
    from rubric_fakes import EXAMPLE_RUBRIC

    results = rubrics.score_many(trajs, EXAMPLE_RUBRIC, judge=ScriptedJudge())
    assert len(results) == len(trajs)
    for result in results:
        assert 0.0 <= result.score <= 1.0
        assert result.items or result.errors


yaml_texts = st.one_of(
    st.text(max_size=200),
    st.text(alphabet=st.sampled_from(list("{}[]:,-&*!|>'\"#%@` \n\tabc01.?<")), max_size=120),
    st.builds(lambda doc, cut: yaml.safe_dump(doc, sort_keys=False)[:cut], rubric_docs, st.integers(0, 400)),
)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(yaml_texts)
def test_random_yaml_never_makes_lint_crash(tmp_path, capsys, text):
    path = tmp_path / "rubric.yaml"
    path.write_bytes(text.encode("utf-8", errors="replace"))   # lone surrogates cannot be written as UTF-8
    assert main(["lint", str(path)]) in (0, 1)
    out = capsys.readouterr().out
    assert all(line.startswith(f"{path}:") for line in out.splitlines())
