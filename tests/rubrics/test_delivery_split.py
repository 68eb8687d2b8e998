import json
from pathlib import Path

import jsonschema
import pytest
from delivery_factory import make_task, task_data
from hypothesis import given, settings
from hypothesis import strategies as st

from rubrics.delivery.tasks.catalog import load_catalog
from rubrics.delivery.tasks.layout import discover
from rubrics.delivery.split.near_duplicates import jaccard, near_duplicates, shingles
from rubrics.delivery.split.heldout import materialize, plan_split, read_plan, write_plan
from rubrics.delivery.tasks.task import TaskSpec
from rubrics.delivery.split.union_find import UnionFind

SCHEMA = json.loads((Path(__file__).resolve().parents[2] / "schemas" / "split.schema.json").read_text())

BASES = [
    "Invoice totals are off by one cent when a line item ends in half a cent; fix the rounding.",
    "The orders index migration drops an index name that does not exist in its down step.",
    "Exporting many rows to CSV is quadratic because each row is appended to a string.",
    "The price cache ignores the currency, so a currency change returns a stale price.",
]


def spec(instruction, category="bugs", group=None):
    return TaskSpec.model_validate(task_data(instruction=instruction, metadata={"category": category, "group": group}))


def brute_force_twins(texts, threshold):
    ids = sorted(texts)
    sets = {t: shingles(texts[t]) for t in ids}
    return {(a, b) for i, a in enumerate(ids) for b in ids[i + 1:] if jaccard(sets[a], sets[b]) >= threshold}


def test_near_twins_found_and_far_texts_not():
    texts = {"a": BASES[0], "b": BASES[0].replace("Invoice", "Credit note"), "c": BASES[1]}
    pairs = near_duplicates(texts)
    assert [(p.a, p.b) for p in pairs] == [("a", "b")] and 0.7 <= pairs[0].jaccard < 1
    assert near_duplicates({"x": "  Fix THE bug ", "y": "fix the\nbug"})[0].jaccard == 1.0   # case and spacing
    assert [(p.a, p.b) for p in near_duplicates({"e": "", "f": "", "g": "x"})] == [("e", "f")]


@settings(max_examples=60, deadline=None)
@given(st.dictionaries(st.text("abc ", max_size=4).map(lambda s: "t" + s), st.text("abcd ", max_size=30), max_size=12),
       st.sampled_from([0.3, 0.5, 0.7, 0.9, 1.0]))
def test_prefix_filter_finds_exactly_the_brute_force_pairs(texts, threshold):
    assert {(p.a, p.b) for p in near_duplicates(texts, threshold)} == brute_force_twins(texts, threshold)


def test_union_find_is_order_independent():
    u = UnionFind(["d", "c", "b", "a"])
    u.union("d", "c")
    u.union("b", "d")
    assert u.components() == [["a"], ["b", "c", "d"]]


task_sets = st.lists(
    st.tuples(st.sampled_from(range(len(BASES))), st.text("xyz", max_size=6), st.sampled_from([None, "g1", "g2", "g3"]),
              st.sampled_from(["bugs", "perf", "migrations"])),
    min_size=1, max_size=20)


@settings(max_examples=80, deadline=None)
@given(task_sets, st.floats(0, 1), st.integers(0, 2**32), st.sampled_from([0.5, 0.7, 0.9]))
def test_split_never_separates_a_group_or_a_near_twin_pair(rows, fraction, seed, threshold):
    # Suffixes on a shared base sentence make near twins at random; labels make groups at random.
    specs = {f"t{i:02d}": spec(BASES[b] + " " + suffix * 3, category, group)
             for i, (b, suffix, group, category) in enumerate(rows)}
    plan = plan_split(specs, fraction, seed, threshold)
    side = {t: "heldout" for t in plan.heldout} | {t: "tasks" for t in plan.tasks}
    assert sorted(side) == sorted(specs) and not set(plan.heldout) & set(plan.tasks)
    for label in ("g1", "g2", "g3"):
        assert len({side[t] for t, s in specs.items() if s.metadata.group == label}) <= 1
    twins = brute_force_twins({t: s.instruction for t, s in specs.items()}, threshold)
    assert all(side[a] == side[b] for a, b in twins)
    assert len(plan.heldout) <= plan.target_heldout == round(fraction * len(specs))
    assert plan_split(specs, fraction, seed, threshold) == plan    # reproducible from the seed
    jsonschema.Draft202012Validator(SCHEMA).validate(json.loads(plan.model_dump_json()))


def test_split_reaches_the_target_when_groups_allow_and_seeds_differ():
    specs = {f"t{i:02d}": spec(f"Task number {i} about topic {i * 7919 % 1000} in module m{i}.", ["a", "b"][i % 2])
             for i in range(20)}
    plans = {seed: plan_split(specs, 0.25, seed) for seed in range(10)}
    assert all(len(p.heldout) == 5 for p in plans.values())
    assert len({tuple(p.heldout) for p in plans.values()}) > 1
    # the category caps keep both categories represented on each side
    assert all(p.by_category["a"].heldout in (2, 3) for p in plans.values())


def test_split_rejects_a_bad_fraction():
    with pytest.raises(ValueError):
        plan_split({"t": spec(BASES[0])}, 1.5, 0)


def _delivery(tmp_path):
    root = tmp_path / "delivery"
    for i, base in enumerate(BASES):
        make_task(root / "tasks" / f"task-{i}", instruction=base, metadata={"group": f"g{i}"})
    make_task(root / "tasks" / "task-twin", instruction=BASES[0].replace("Invoice", "Receipt"))
    return root


def test_plan_round_trips_and_materialize_copies_without_touching_input(tmp_path):
    root = _delivery(tmp_path)
    delivery, specs, problems = load_catalog(root)
    assert problems == []
    plan = plan_split(specs, 0.4, seed=3)
    write_plan(plan, tmp_path / "split.json")
    assert read_plan(tmp_path / "split.json") == plan
    before = sorted((p.relative_to(root).as_posix(), p.read_bytes()) for p in root.rglob("*") if p.is_file())
    out = tmp_path / "out"
    materialize(plan, root, delivery, out)
    after = sorted((p.relative_to(root).as_posix(), p.read_bytes()) for p in root.rglob("*") if p.is_file())
    assert before == after
    copied = discover(out)
    assert sorted(r.id for r in copied.heldout) == plan.heldout
    assert sorted(r.id for r in copied.tasks) == plan.tasks
    assert (out / "split.json").is_file()
    assert [(p.a, p.b) for p in plan.near_duplicates] == [("task-0", "task-twin")]
    held = set(plan.heldout)
    assert ("task-0" in held) == ("task-twin" in held)
    assert all((out / side / t / "grade.sh").stat().st_mode & 0o111 for side, ids in
               (("tasks", plan.tasks), ("heldout", plan.heldout)) for t in ids)


def test_materialize_refuses_a_used_or_nested_target(tmp_path):
    root = _delivery(tmp_path)
    delivery, specs, _ = load_catalog(root)
    plan = plan_split(specs, 0.4, seed=3)
    used = tmp_path / "used"
    used.mkdir()
    (used / "keep.txt").write_text("mine")
    with pytest.raises(FileExistsError):
        materialize(plan, root, delivery, used)
    assert (used / "keep.txt").read_text() == "mine"
    with pytest.raises(ValueError):
        materialize(plan, root, delivery, root / "inside")
