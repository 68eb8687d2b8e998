"""The judge's house: one base (rubrics/judges/backend.py) owns the method, the calibration and head lookup, the
identity and the cache keys of every judge that scores prompts, the embedded and OpenAI-compatible judges and one a
user writes; one fitted-file kind (rubrics/judges/fitted/fitted_file.py) with a layout version per method, so that a new
or changed method refuses only its own files; and a shipped file that is refused stops the judge at start-up under
the tests ($RUBRICS_STRICT_FITTED_FILES, set by tests/conftest.py) and warns a user. No model is loaded."""
from __future__ import annotations

import json
import warnings

import pytest

from rubrics.judges.backend import FitRequest, JudgeBackend, KeyedRequest
from rubrics.judges.fitted.calibration_file import CalibrationFile, CalibrationFileError, ModelIdentity, \
    load_calibration_file
from rubrics.judges.backends.embedded import EmbeddedJudge
from rubrics.judges.fitted.fitted_file import STRICT_ENV, ShippedFileError, ShippedFileWarning, strict_fitted_files
from rubrics.judges.fitted.judge_models import CALIBRATIONS, HEADS, JUDGE_MODELS, UncalibratedJudgeWarning
from rubrics.judges.methods import IDENTITY, METHOD_CLASSES, Calibration, JudgeMethod, PromptSpec, ScoredPrompt
from rubrics.judges.methods.statement import StatementMethod
from rubrics.judges.backends.openai import OpenAIJudge
from rubrics.judges.prompt.prompts import Piece, untrusted
from rubrics.judges.protocol import EvidenceBlock, JudgeContext, JudgeItem, JudgeRequest, Verdict
from rubrics.judges.fitted.verdict_head import load_head

SMOL = ModelIdentity("SmolLM2-135M-Instruct", "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53")
SHIPPED = sorted(CALIBRATIONS.glob("*-instruct*.json")) + sorted(HEADS.glob("*.json"))


# ------------------------------------------------------- a method a user adds: one file's worth, one registry line

class EchoMethod(JudgeMethod):
    """A user's new method: asks whether the item holds, raw score = log P(Yes) - log P(No)."""

    name = "echo"
    layout_version = "2031-05-01.1"   # its own: no other method's files depend on it
    over_http = True
    description = "echo: does the item hold, yes or no"

    def prompts(self, item: JudgeItem) -> list[PromptSpec]:
        return [PromptSpec("Say whether the work does this. Answer Yes or No.",
                           (Piece("\nThe work "), untrusted(item.criterion), Piece("?")), (Piece("Yes"), Piece("No")))]

    def raw_score(self, item: JudgeItem, scored: list[ScoredPrompt]) -> float:
        yes, no = scored[0].logprobs
        return yes - no


@pytest.fixture
def echo(monkeypatch):
    monkeypatch.setitem(METHOD_CLASSES, EchoMethod.name, EchoMethod)   # the registry line of METHOD_CLASSES
    return EchoMethod


class FakeScorerJudge(JudgeBackend):
    """A judge a user writes: where its model's identity comes from and how prompts are scored (a fixed answer:
    log P(Yes) = -0.5, log P(No) = -2.5); the base resolves the method, the calibrations and the keys."""

    kind = "fake"

    def __init__(self, identity: ModelIdentity = SMOL, **asked):
        self.model, self._model_identity, self.scored = identity.name, identity, []
        self.set_up(FitRequest(**asked))

    def model_identity(self) -> ModelIdentity:
        return self._model_identity

    def model_label(self) -> str:
        return self.model

    def default_method(self, known, head) -> str:
        return "choice"

    def key_shared(self) -> dict:
        return {"model": self.model}

    def key_sent(self, requests) -> list[KeyedRequest | None]:
        keyed = []
        for request in requests:
            method = self.method_for(request.item)
            keyed.append(KeyedRequest(method, {"prompts": [repr(spec) for spec in method.prompts(request.item)]}))
        return keyed

    def comparison_sent(self, requests) -> list:
        return [None] * len(requests)

    def judge(self, requests) -> list[Verdict]:
        verdicts = []
        for request in requests:
            method = self.method_for(request.item)
            specs = method.prompts(request.item)
            self.scored += specs
            verdicts.append(method.verdict(request.item, [ScoredPrompt((-0.5, -2.5), (1, 1)) for _ in specs]))
        return verdicts


def request(**fields) -> JudgeRequest:
    context = JudgeContext("t", "Sum the invoices.", None, (EvidenceBlock("final_answer", "The total is 4."),))
    return JudgeRequest(context, JudgeItem(**{"id": "a", "kind": "criterion", "points": 1,
                                              "criterion": "states the total", **fields}))


def test_the_tests_run_strict():
    assert strict_fitted_files(), f"tests/conftest.py sets {STRICT_ENV}: a refused shipped file fails the test"


def test_a_new_method_refuses_no_shipped_file_of_another_method_and_runs_end_to_end(echo, tmp_path):
    import rubrics

    for path in SHIPPED:   # every shipped calibration and head fits the prompts as they are
        loaded = (load_head if path.parent == HEADS else load_calibration_file)(path)
        assert loaded.refusal(None) is None, path
    for name in JUDGE_MODELS:   # and the judges start with them, under the tests' strict mode (no model loaded)
        judge = EmbeddedJudge(name)
        assert judge.calibration_file is None and judge.methods.calibrations   # the shipped calibration
        assert (judge.head is not None) == (HEADS / f"{name}.json").is_file()
    # the new method, end to end: its own calibration file, a user's judge, rubrics.score
    CalibrationFile(SMOL, {"echo": Calibration(1.0, -2.0)}).write(tmp_path / "echo.json")
    assert json.loads((tmp_path / "echo.json").read_text())["prompt_layout"] == "2031-05-01.1"
    judge = FakeScorerJudge(method="echo", calibration=tmp_path / "echo.json")
    rubric = {"version": 1, "id": "r", "task": "Sum the invoices.",
              "criteria": [{"id": "total", "points": 1, "judge": "states the total"}]}
    result = rubrics.score({"id": "t1", "messages": [], "final_answer": "The total is 4."}, rubric, judge=judge)
    [item] = [i for i in result.items if i.id == "total"]
    # raw = -0.5 - -2.5 = 2.0; sigmoid(1.0 * 2.0 - 2.0) = 0.5, at the threshold 0.5: met
    assert item.probability == pytest.approx(0.5) and item.status == "met" and result.score == 1.0
    assert judge.scored[0].instructions.startswith("Say whether the work does this.")
    assert judge.name == "fake:SmolLM2-135M-Instruct" and judge.identity() == SMOL


def test_a_layout_version_binds_only_the_files_of_its_own_method(echo, tmp_path, monkeypatch):
    both = CalibrationFile(SMOL, {"echo": Calibration(1.0, 0.0), "statement": Calibration(0.5, 0.1)})
    both.write(tmp_path / "both.json")
    written = json.loads((tmp_path / "both.json").read_text())
    assert written["prompt_layout"] == {"echo": "2031-05-01.1", "statement": StatementMethod.layout_version}
    assert load_calibration_file(tmp_path / "both.json") == both
    CalibrationFile(SMOL, {"statement": Calibration(0.5, 0.1)}).write(tmp_path / "statement.json")

    monkeypatch.setattr(EchoMethod, "layout_version", "2031-06-01.1")   # the new method's prompts changed
    with pytest.raises(CalibrationFileError, match=r"both.json: prompt_layout.echo: expected '2031-06-01.1' "
                                                   r"\(the judge's\), found '2031-05-01.1'.*of the echo method"):
        FakeScorerJudge(calibration=tmp_path / "both.json")
    FakeScorerJudge(calibration=tmp_path / "statement.json")   # another method's file is untouched
    for name in JUDGE_MODELS:
        EmbeddedJudge(name)   # and so is every shipped file


def test_a_shipped_file_refused_stops_the_judge_under_the_tests_and_warns_a_user(monkeypatch):
    monkeypatch.setattr(StatementMethod, "layout_version", "2099-01-01.1")   # statement's prompts changed
    with pytest.raises(ShippedFileError, match=r"smollm2-135m-instruct.json: prompt_layout: expected "
                                               r"'2099-01-01.1'.*of the statement method.*package is broken"):
        EmbeddedJudge("smollm2-135m-instruct")
    monkeypatch.delenv(STRICT_ENV)
    with pytest.warns(ShippedFileWarning, match="of the statement method"), \
            pytest.warns(UncalibratedJudgeWarning):
        judge = EmbeddedJudge("smollm2-135m-instruct", method="choice")
    assert judge.methods.named("choice").calibration == IDENTITY   # the refused file is not used
    assert judge.head is not None   # the head covers the head method only: it still fits


def test_the_embedded_and_openai_judges_resolve_calibrations_alike():
    """One base: the shipped calibration of a catalog model, calibrations= over it, a file the user names over both."""
    mine = {"statement": Calibration(2.0, 0.5)}
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        embedded = EmbeddedJudge("smollm2-135m-instruct", calibrations=mine)
        served = OpenAIJudge("http://127.0.0.1:9/v1", model="SmolLM2-135M-Instruct", calibrations=mine)
    assert embedded.methods.calibrations == served.methods.calibrations
    assert served.methods.calibrations["statement"] == Calibration(2.0, 0.5)
    assert served.methods.calibrations["choice"] != IDENTITY   # the shipped entry, under its own name
    assert OpenAIJudge("http://127.0.0.1:9/v1", model="another", calibrations=mine).methods.calibrations == mine
    assert served.identity() == ModelIdentity("SmolLM2-135M-Instruct") and served.name == "openai:SmolLM2-135M-Instruct"


def test_the_base_makes_the_cache_key_of_the_method_and_the_backends_part(echo):
    judge = FakeScorerJudge(method="echo", calibrations={"echo": Calibration(1.0, -2.0)})
    keys = judge.cache_keys([request(), request(threshold=0.7), request(method="choice")])
    assert None not in keys and len(set(keys)) == 3   # the threshold and the method are in the key
    assert FakeScorerJudge(method="echo", calibrations={"echo": Calibration(1.0, -1.0)}).cache_keys(
        [request()])[0] != keys[0]   # and the calibration
    assert judge.comparison_keys([object()]) == [None]


def test_a_method_without_a_layout_version_of_its_own_is_refused_when_defined():
    with pytest.raises(TypeError, match="'louder' .* declares no layout_version of its own"):
        class Louder(StatementMethod):   # a subclass with new prompts must not pass for statement's files
            name = "louder"
