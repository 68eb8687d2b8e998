"""EmbeddedJudge on the real engine, over a tiny random model that uses the embedded tokenizer (fast), so the
batching, prefix sharing, isolation and error paths are exercised end to end. Verdict quality is measured by
`rubric judge-eval` on the real model, not here."""
from __future__ import annotations

import json

import pytest
import torch

import rubrics
from judge_models import CFO_RUBRIC, LABELS_DIR, cfo_trajectory_paths, tiny_judge_model
from rubrics.judges.backends.embedded import EmbeddedJudge
from rubrics.judges.fitted.logistic import logit, sigmoid
from rubrics.judges.methods import Calibration, ChoiceMethod, ScoredPrompt
from rubrics.judges.protocol import EvidenceBlock
from test_judge_prompts import INJECTION, request

torch.set_num_threads(min(2, torch.get_num_threads()))


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    return tiny_judge_model(str(tmp_path_factory.mktemp("judge-model")))


@pytest.fixture(scope="module")
def judge(model_dir):
    return EmbeddedJudge(model=str(model_dir), method="choice")


def statuses(result):
    return [(item.id, item.status) for item in result.items]


def probabilities(result):
    """The probabilities of the judge items the judge was asked (a missing fact decides an item without it)."""
    return [item.probability for item in result.items if item.method == "judge" and item.probability is not None]


@pytest.mark.parametrize("method", ["choice", "likelihood"])
def test_grading_the_example_computes_under_30_percent_of_prompt_tokens(model_dir, method):
    judge = EmbeddedJudge(model=str(model_dir), method=method)
    results = rubrics.score_many(cfo_trajectory_paths(), CFO_RUBRIC, judge=judge)
    assert all(r.complete for r in results)
    assert all(0.0 < p < 1.0 for r in results for p in probabilities(r))
    stats = judge.stats()
    assert stats["computed_prompt_tokens"] / stats["prompt_tokens"] < 0.3
    assert results[0].judge == f"embedded:{model_dir}"


def test_scores_are_identical_one_at_a_time_or_all_together(model_dir):
    paths = cfo_trajectory_paths()[:4]
    together = rubrics.score_many(paths, CFO_RUBRIC, judge=EmbeddedJudge(model=str(model_dir), method="choice"))
    one_judge = EmbeddedJudge(model=str(model_dir), method="choice")
    alone = [rubrics.score(path, CFO_RUBRIC, judge=one_judge) for path in paths]
    for a, b in zip(together, alone):
        assert (a.score, a.earned, statuses(a)) == (b.score, b.earned, statuses(b))
        assert probabilities(a) == pytest.approx(probabilities(b), abs=1e-5)


def test_an_injection_trajectory_is_graded_as_text_and_leaves_the_others_alone(judge):
    paths = cfo_trajectory_paths()[:2]
    injected = json.loads((LABELS_DIR / "cfo-mis" / "trajectories" / "cfo-l06.json").read_text())
    injected["final_answer"] = INJECTION + "\n" + injected["final_answer"]
    before = rubrics.score_many(paths, CFO_RUBRIC, judge=judge)
    after = rubrics.score_many([paths[0], injected, paths[1]], CFO_RUBRIC, judge=judge)
    for a, b in zip(before, [after[0], after[2]]):
        assert statuses(a) == statuses(b)
        assert probabilities(a) == pytest.approx(probabilities(b), abs=1e-5)
    assert after[1].complete
    # on token ids: the injected prompt holds exactly the template's special tokens, like a clean one
    specials = set(judge.llm.tokenizer.all_special_ids)
    clean, dirty = judge.build_prompts([request(), request(trajectory_id="u",
                                                           evidence=(EvidenceBlock("final_answer", INJECTION),))])
    assert sorted(t for t in dirty.ids() if t in specials) == sorted(t for t in clean.ids() if t in specials)


def test_reasoned_mode_generates_a_rationale_then_scores(judge):
    before = judge.stats()["generated_tokens"]
    verdict, = judge.judge([request(mode="reasoned", max_tokens=6)])
    assert verdict.error is None and 0.0 < verdict.probability < 1.0
    assert isinstance(verdict.rationale, str)
    assert 1 <= judge.stats()["generated_tokens"] - before <= 6
    assert verdict.met == (verdict.probability >= 0.5)


def test_item_threshold_decides_met(judge):
    low, high = judge.judge([request(threshold=0.01), request(id="b", threshold=0.99)])
    assert low.probability == pytest.approx(high.probability)
    assert (low.met, high.met) == (True, False)


def test_long_evidence_is_cut_and_an_impossible_item_errors_alone(tmp_path_factory):
    small = EmbeddedJudge(model=str(tiny_judge_model(str(tmp_path_factory.mktemp("small")), 1024)),
                          method="likelihood")
    long = (EvidenceBlock("final_answer", "start " + "spend line 48.2L " * 2000 + " end"),)
    ok, cut, impossible = small.judge([request(), request(trajectory_id="u", evidence=long),
                                       request(id="z", criterion="too long " * 2000)])
    assert ok.error is None and cut.error is None and small.last_cut_tokens > 0
    assert ok.detail.startswith("likelihood p=") and "the evidence moves the item's statement by" in ok.detail
    assert impossible.met is None and "cannot fit the model's context of 1024 tokens" in impossible.error


def test_a_missing_model_is_refused_at_once_and_an_unloadable_one_gives_error_verdicts(tmp_path):
    with pytest.raises(FileNotFoundError, match="nowhere: not a catalog model, a local model folder or a .gguf"):
        EmbeddedJudge(model=str(tmp_path / "nowhere"))
    broken = tmp_path / "broken.gguf"
    broken.write_bytes(b"not a gguf file")
    with pytest.warns(UserWarning, match="not in the catalog"):
        judge = EmbeddedJudge(model=str(broken))
    verdicts = judge.judge([request(), request(id="b")])
    assert all(v.met is None and "embedded judge unavailable" in v.error for v in verdicts)


def test_unknown_method_is_rejected():
    with pytest.raises(ValueError, match="method"):
        EmbeddedJudge(method="vibes")


def test_two_trajectories_with_the_same_id_get_their_own_verdicts(judge):
    # nothing keys a request by trajectory id: same id, different evidence, different probabilities
    a, b = judge.judge([request(), request(evidence=(EvidenceBlock("final_answer", "Nothing about spend."),))])
    assert a.error is None and b.error is None and a.probability != pytest.approx(b.probability, abs=1e-6)
    alone, = judge.judge([request(evidence=(EvidenceBlock("final_answer", "Nothing about spend."),))])
    assert alone.probability == pytest.approx(b.probability, abs=1e-5)


def test_a_calibration_given_to_the_judge_replaces_the_methods_default(model_dir, judge):
    raw = EmbeddedJudge(model=str(model_dir), method="choice", calibrations={"choice": Calibration()}, llm=judge.llm)
    shipped = EmbeddedJudge(model=str(model_dir), method="choice", llm=judge.llm)
    shifted = EmbeddedJudge(model=str(model_dir), method="choice", calibrations={"choice": Calibration(2.0, 1.0)},
                            llm=judge.llm)
    [plain], [calibrated], [default] = raw.judge([request()]), shifted.judge([request()]), shipped.judge([request()])
    assert calibrated.probability == pytest.approx(sigmoid(2.0 * logit(plain.probability) + 1.0), abs=1e-6)
    # a model outside the catalog has no calibration of its own: the identity, never another model's
    assert default.probability == pytest.approx(plain.probability, abs=1e-9)


def test_uncalibrated_choice_probability_renormalises_over_the_two_answers():
    def choice_probability(logprobs):
        item = request().item
        return ChoiceMethod(Calibration()).verdict(item, [ScoredPrompt(tuple(logprobs), (1, 1))]).probability

    assert choice_probability([-1.0, -1.0]) == pytest.approx(0.5)
    assert choice_probability([-0.1, -2.4]) == pytest.approx(1 / (1 + pow(2.718281828459045, -2.3)))
    assert choice_probability([-900.0, -1000.0]) == pytest.approx(1.0)


@pytest.mark.slow
def test_the_embedded_model_grades_the_example_with_a_shared_prefix():
    """Acceptance on the real SmolLM2-135M-Instruct: every item graded, under 30% of prompt tokens computed."""
    judge = EmbeddedJudge()
    results = rubrics.score_many(cfo_trajectory_paths(), CFO_RUBRIC, judge=judge)
    assert all(r.complete and r.judge == "embedded:SmolLM2-135M-Instruct" for r in results)
    stats = judge.stats()
    assert stats["computed_prompt_tokens"] / stats["prompt_tokens"] < 0.3


def test_a_lone_surrogate_in_one_trajectory_costs_no_other_its_verdict(judge):
    surrogate = {"id": "odd", "messages": [{"role": "user", "content": "go"}, {"role": "assistant", "content": "",
                 "tool_calls": [{"id": "c1", "name": "send_email", "arguments": {"to": "\ud800"}}]}],
                 "final_answer": "Done \udfff."}
    clean = json.loads(cfo_trajectory_paths()[0].read_text())
    together = rubrics.score_many([clean, surrogate], CFO_RUBRIC, judge=judge)
    alone = rubrics.score(clean, CFO_RUBRIC, judge=judge)
    assert all(r.complete for r in together)
    assert probabilities(together[0]) == pytest.approx(probabilities(alone), abs=1e-5)


def test_a_request_that_breaks_prompt_building_errs_alone(judge, monkeypatch):
    from rubrics.judges.prompt.ids import PromptBuilder

    build = PromptBuilder.build

    def fragile(self, wanted):
        if any(w.context.trajectory_id == "boom" for w in wanted):
            raise TypeError("a tokenizer that cannot take this text")
        return build(self, wanted)

    monkeypatch.setattr(PromptBuilder, "build", fragile)
    paths = cfo_trajectory_paths()[:2]
    boom = {**json.loads(paths[1].read_text()), "id": "boom"}
    results = rubrics.score_many([paths[0], boom], CFO_RUBRIC, judge=judge)
    assert results[0].complete and not results[1].complete
    assert all("could not build this prompt: TypeError" in e for e in results[1].errors)
