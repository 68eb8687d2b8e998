"""Judge usage, panels and the verdict cache on the real engine (a tiny random model over the embedded tokenizer,
so each test runs in seconds): usage adds up to the engine's own counters, a panel of embedded methods is one
engine batch, and re-grading from the cache does no model work."""
from __future__ import annotations

import shutil

import pytest
import torch

import rubrics
from judge_models import CFO_RUBRIC, cfo_items_asked, cfo_trajectory_paths, tiny_judge_model
from rubrics.judges.cache.cached import CachedJudge
from rubrics.judges.backends.embedded import EmbeddedJudge
from rubrics.judges.methods import Calibration
from rubrics.judges.panel.judge import PanelJudge, PanelMember
from rubrics.judges.usage import total_usage
from rubrics.judges.cache.verdict_cache import VerdictCache
from rubrics.trajectory import load_trajectory

torch.set_num_threads(min(2, torch.get_num_threads()))


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    return tiny_judge_model(str(tmp_path_factory.mktemp("judge-model")))


def fresh_llm(model_dir):
    from judge_engine import LLM

    return LLM(model=str(model_dir), dtype="float32")


class CountingLLM:
    """The real LLM, counting its score batches."""

    def __init__(self, llm):
        self.llm = llm
        self.batches = 0

    def __getattr__(self, name):
        return getattr(self.llm, name)

    def score_with_usage(self, *args, **kwargs):
        self.batches += 1
        return self.llm.score_with_usage(*args, **kwargs)


def usage_of(results):
    return total_usage(r.judge_usage for r in results)


def judge_probabilities(results):
    """Of the judge items the judge was asked (a missing fact decides some without it)."""
    return [(r.trajectory_id, i.id, i.probability) for r in results for i in r.items
            if i.method == "judge" and i.probability is not None]


def test_judge_usage_adds_up_to_the_engines_counters(model_dir):
    llm = fresh_llm(model_dir)
    results = rubrics.score_many(cfo_trajectory_paths(), CFO_RUBRIC, judge=EmbeddedJudge(method="likelihood", llm=llm))
    stats = llm.stats()
    usage = usage_of(results)
    assert all(r.judge_usage.prompt_tokens > 0 for r in results)
    assert (usage.prompt_tokens, usage.cached_tokens, usage.computed_tokens) == (
        stats["prompt_tokens"], stats["cached_prompt_tokens"], stats["computed_prompt_tokens"])
    assert usage.completion_tokens == 0 and usage.cached_verdicts == 0


def test_reasoned_mode_counts_the_rationales_generated_tokens(model_dir):
    from judge_models import CFO_DIR
    from rubrics.rubric.load import load_rubric

    rubric = load_rubric(CFO_DIR / "rubric.yaml")
    rubric = rubric.model_copy(update={"judge": rubric.judge.model_copy(update={"mode": "reasoned", "max_tokens": 4})})
    llm = fresh_llm(model_dir)
    results = rubrics.score_many(cfo_trajectory_paths()[:2], rubric, judge=EmbeddedJudge(method="choice", llm=llm))
    assert usage_of(results).completion_tokens == llm.stats()["generated_tokens"] > 0


def test_a_panel_of_embedded_methods_is_one_engine_batch_and_computes_less_than_its_members_apart(model_dir):
    paths = cfo_trajectory_paths()
    counting = CountingLLM(fresh_llm(model_dir))
    shared = EmbeddedJudge(llm=counting)
    panel = PanelJudge([PanelMember(shared, "statement"), PanelMember(shared, "likelihood")])
    together = rubrics.score_many(paths, CFO_RUBRIC, judge=panel)
    assert counting.batches == 1
    panel_computed = counting.stats()["computed_prompt_tokens"]
    assert usage_of(together).computed_tokens == panel_computed
    apart = {}
    for method in ("statement", "likelihood"):
        llm = fresh_llm(model_dir)
        alone = rubrics.score_many(paths, CFO_RUBRIC, judge=EmbeddedJudge(method=method, llm=llm))
        apart[method] = llm.stats()["computed_prompt_tokens"]
        # each member's verdict in the panel is the one it gives alone
        member = 0 if method == "statement" else 1
        assert [i.members[member].probability for r in together for i in r.items if i.members] == \
            pytest.approx([p for _, _, p in judge_probabilities(alone)], abs=1e-5)
    # likelihood's main prompts are statement's prompts: the panel adds only its content-free baselines
    assert panel_computed < apart["statement"] + apart["likelihood"]
    assert panel_computed - apart["statement"] < apart["likelihood"] / 2


def test_re_grading_from_the_cache_does_no_model_work_and_gives_the_same_results(model_dir, tmp_path):
    llm = fresh_llm(model_dir)
    cache = VerdictCache(tmp_path / "v.sqlite")
    judge = CachedJudge(EmbeddedJudge(method="likelihood", llm=llm), cache)
    paths = cfo_trajectory_paths()
    first = rubrics.score_many(paths, CFO_RUBRIC, judge=judge)
    before = llm.stats()
    second = rubrics.score_many(paths, CFO_RUBRIC, judge=judge)
    after = llm.stats()
    assert after["computed_prompt_tokens"] == before["computed_prompt_tokens"]
    assert after["prompt_tokens"] == before["prompt_tokens"]   # no prompt reached the engine at all
    assert [r.to_dict() | {"judge_usage": None} for r in second] == [r.to_dict() | {"judge_usage": None}
                                                                      for r in first]
    asked = sum(map(cfo_items_asked, paths))
    assert asked == 33   # 40 judge items, 7 decided by a missing fact
    assert usage_of(second).cached_verdicts == asked and usage_of(second).prompt_tokens == 0
    assert len(cache) == asked


def test_one_character_of_evidence_misses_only_that_trajectorys_items(model_dir, tmp_path):
    llm = fresh_llm(model_dir)
    judge = CachedJudge(EmbeddedJudge(method="choice", llm=llm), VerdictCache(tmp_path / "v.sqlite"))
    trajectories = [load_trajectory(p) for p in cfo_trajectory_paths()]
    rubrics.score_many(trajectories, CFO_RUBRIC, judge=judge)
    edited = load_trajectory({**trajectories[0].model_dump(), "final_answer": trajectories[0].final_answer + "."})
    results = rubrics.score_many([edited] + trajectories[1:], CFO_RUBRIC, judge=judge)
    assert results[0].judge_usage.cached_verdicts == 0 and results[0].judge_usage.computed_tokens > 0
    assert all(r.judge_usage.cached_verdicts == cfo_items_asked(path) and r.judge_usage.prompt_tokens == 0
               for r, path in zip(results[1:], cfo_trajectory_paths()[1:]))


def test_another_calibration_or_another_model_misses(model_dir, tmp_path):
    from safetensors.torch import load_file, save_file

    cache = VerdictCache(tmp_path / "v.sqlite")
    paths = cfo_trajectory_paths()[:2]
    llm = fresh_llm(model_dir)
    rubrics.score_many(paths, CFO_RUBRIC, judge=CachedJudge(EmbeddedJudge(method="choice", llm=llm), cache))
    recalibrated = CachedJudge(EmbeddedJudge(method="choice", llm=llm,
                                             calibrations={"choice": Calibration(1.5, 0.1)}), cache)
    assert usage_of(rubrics.score_many(paths, CFO_RUBRIC, judge=recalibrated)).cached_verdicts == 0
    other = tmp_path / "other-model"
    shutil.copytree(model_dir, other)
    weights, = other.glob("*.safetensors")
    tensors = load_file(weights)
    name = next(n for n in tensors if "norm" in n)
    tensors[name] = tensors[name] * 1.01
    save_file(tensors, weights, metadata={"format": "pt"})
    changed = CachedJudge(EmbeddedJudge(method="choice", llm=fresh_llm(other)), cache)
    assert usage_of(rubrics.score_many(paths, CFO_RUBRIC, judge=changed)).cached_verdicts == 0
    same = CachedJudge(EmbeddedJudge(method="choice", llm=llm), cache)
    assert usage_of(rubrics.score_many(paths, CFO_RUBRIC, judge=same)).cached_verdicts == 10
