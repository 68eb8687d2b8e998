"""Each judge model with its own calibration and method: a catalog model gets the calibration shipped for it, a
model outside the catalog the identity and a warning, never another model's; and the default judge model."""
from __future__ import annotations

import contextlib
import json
from dataclasses import replace
import warnings

import pytest
from judge_models import REPO, tiny_judge_model

from rubrics.judges.fitted.calibration_file import CalibrationFileError, ModelIdentity, load_calibration_file
from rubrics.judges.backends.embedded import EmbeddedJudge
from rubrics.judges.fitted.judge_models import CALIBRATIONS, DEFAULT_JUDGE_MODEL, JUDGE_MODELS, UncalibratedJudgeWarning, \
    default_judge_model, default_quantization, shipped_calibration_path, shipped_head
from rubrics.judges.methods import IDENTITY, METHOD_NAMES


@pytest.mark.parametrize("name", sorted(JUDGE_MODELS))
def test_every_catalog_judge_model_ships_a_calibration_made_for_it_with_its_default_method(name):
    """A method measured on the model has its fit; one never measured on it has no entry (and so the identity)."""
    from judge_engine import find_model

    shipped = load_calibration_file(CALIBRATIONS / f"{name}.json")   # refuses degenerate fits
    entry = find_model(name)
    assert (shipped.judge_model.name, shipped.judge_model.weights_sha256) == (entry.model, entry.sha256)
    assert shipped.judge_model.quantization is None
    assert shipped.refusal(None) is None   # fitted on each of its methods' prompts as they are now
    assert set(shipped.calibrations) <= set(METHOD_NAMES)
    default = JUDGE_MODELS[name]
    if default.method == "head":   # a trained head (identity calibration), and a calibrated zero-shot fallback
        assert shipped_head(ModelIdentity(entry.model, entry.sha256)) is not None
        assert default.zero_shot in shipped.calibrations
    else:
        assert default.method in shipped.calibrations
    if default.quantization:   # it runs quantized unless asked: that calibration ships too, fitted so
        quantized = load_calibration_file(shipped_calibration_path(name, default.quantization))
        assert quantized.judge_model == ModelIdentity(entry.model, entry.sha256, default.quantization)
        assert quantized.refusal(None) is None and default.method in quantized.calibrations


def test_a_model_whose_method_is_its_head_falls_back_to_its_zero_shot_method_where_no_head_fits():
    """The head reads the hidden states of the model as it computes them: an int8 judge has none shipped."""
    heads = [m for m in JUDGE_MODELS.values() if m.method == "head"]
    assert heads, "no catalog model judges with a head"
    for model in heads:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UncalibratedJudgeWarning)   # no int8 calibration either
            judge = EmbeddedJudge(model.catalog_name, quantization="int8")
        assert judge.head is None and judge.method == model.zero_shot
        assert EmbeddedJudge(model.catalog_name).method == "head"


@pytest.mark.parametrize("name", sorted(JUDGE_MODELS))
def test_a_catalog_model_judges_with_its_own_method_and_calibration_without_being_fetched(name, monkeypatch):
    import subprocess

    monkeypatch.setattr(subprocess, "run", lambda *a, **k: pytest.fail("fetched the model to build the judge"))
    shipped = load_calibration_file(shipped_calibration_path(name, JUDGE_MODELS[name].quantization))
    with warnings.catch_warnings():
        warnings.simplefilter("error", UncalibratedJudgeWarning)
        judge = EmbeddedJudge(name)
    assert judge.name == f"embedded:{shipped.judge_model.name}"
    assert judge.method == JUDGE_MODELS[name].method
    for method in METHOD_NAMES:
        if method == "head" and judge.head is None:   # no head shipped for it: the head method cannot be made
            continue
        assert judge.methods.named(method).calibration == shipped.calibrations.get(method, IDENTITY)
    assert judge.calibration_file is None   # shipped with the model, not a file the user chose
    quantized = f" in {JUDGE_MODELS[name].quantization}" if JUDGE_MODELS[name].quantization else ""
    with (pytest.warns(UncalibratedJudgeWarning, match=f"no calibration shipped for the likelihood method{quantized}")
          if "likelihood" not in shipped.calibrations else contextlib.nullcontext()):
        assert EmbeddedJudge(name, method="likelihood").method == "likelihood"


def test_a_catalog_model_runs_with_its_own_quantization_unless_another_is_asked():
    """The default judge model runs int8 (within 0.02 of float32 held out, its calibration fitted so); "none" or
    None asks for float32 results and gets float32's calibration; the other models run float32."""
    assert JUDGE_MODELS[DEFAULT_JUDGE_MODEL].quantization == "int8"
    by_default = EmbeddedJudge(DEFAULT_JUDGE_MODEL)
    assert by_default.identity().quantization == "int8" and by_default.engine_options["quantization"] == "int8"
    int8_file = load_calibration_file(shipped_calibration_path(DEFAULT_JUDGE_MODEL, "int8"))
    assert by_default.methods.named("choice").calibration == int8_file.calibrations["choice"]
    float32_file = load_calibration_file(shipped_calibration_path(DEFAULT_JUDGE_MODEL))
    for asked in ("none", None):
        float32 = EmbeddedJudge(DEFAULT_JUDGE_MODEL, quantization=asked)
        assert float32.identity().quantization is None and float32.engine_options["quantization"] is None
        assert float32.methods.named("choice").calibration == float32_file.calibrations["choice"]
    assert float32_file.calibrations["choice"] != int8_file.calibrations["choice"]
    for name in set(JUDGE_MODELS) - {DEFAULT_JUDGE_MODEL}:
        assert EmbeddedJudge(name).identity().quantization is None
    assert default_quantization(DEFAULT_JUDGE_MODEL, "cuda") is None   # int8 products run on the CPU only
    assert default_quantization("path/to/qwen2.5-coder-1.5b-instruct.gguf") is None   # a path: as the user gave it
    assert default_quantization(None) is None


def test_calibrations_are_not_shared_between_models():
    small = EmbeddedJudge("smollm2-135m-instruct").methods.named("choice").calibration
    big = EmbeddedJudge("qwen2.5-coder-1.5b-instruct").methods.named("choice").calibration
    assert small != big


def test_a_model_outside_the_catalog_gets_the_identity_and_a_warning_naming_the_fit_command(tmp_path):
    folder = tiny_judge_model(str(tmp_path))
    with pytest.warns(UncalibratedJudgeWarning, match="rubric judge-eval LABELS.jsonl --rubric RUBRIC --model "
                                                      f"{folder} --method METHOD --fit-calibration --write"):
        judge = EmbeddedJudge(str(folder))
    assert judge.method == "choice" and judge.name == f"embedded:{folder}"
    assert all(judge.methods.named(method).calibration == IDENTITY for method in METHOD_NAMES if method != "head")
    with warnings.catch_warnings():   # a calibration of its own: nothing to warn about
        warnings.simplefilter("error", UncalibratedJudgeWarning)
        EmbeddedJudge(str(folder), calibrations={"choice": IDENTITY})


def test_another_models_calibration_file_is_refused():
    with pytest.raises(CalibrationFileError, match="judge_model.name: expected 'Qwen2.5-Coder-1.5B-Instruct'"):
        EmbeddedJudge("qwen2.5-coder-1.5b-instruct", calibration=CALIBRATIONS / "smollm2-135m-instruct.json")


def test_the_default_judge_model_is_the_chosen_one_unless_the_environment_names_another(monkeypatch):
    monkeypatch.delenv("RUBRICS_JUDGE_MODEL", raising=False)
    assert default_judge_model() == DEFAULT_JUDGE_MODEL
    assert EmbeddedJudge().name == "embedded:Qwen2.5-Coder-1.5B-Instruct"
    monkeypatch.setenv("RUBRICS_JUDGE_MODEL", "qwen2.5-coder-0.5b-instruct")
    assert EmbeddedJudge().name == "embedded:Qwen2.5-Coder-0.5B-Instruct"


def test_the_measured_quality_names_every_catalog_model():
    table = json.loads((CALIBRATIONS / "quality.json").read_text())
    assert set(table["models"]) == set(JUDGE_MODELS)
    assert table["default"] == DEFAULT_JUDGE_MODEL
    assert (REPO / "benchmarks" / "judge_quality.py").is_file()


def test_grade_method_sets_the_method_of_items_that_name_none(tmp_path):
    import subprocess
    import sys

    from judge_models import CFO_RUBRIC, cfo_trajectory_paths

    folder = tiny_judge_model(str(tmp_path))
    command = [sys.executable, "-m", "rubrics.cli.main", "grade", str(CFO_RUBRIC), str(cfo_trajectory_paths()[0]),
               "--model", str(folder), "--format", "json", "--no-cache"]
    by_method = {}
    for method in ("likelihood", "choice"):
        done = subprocess.run([*command, "--method", method], cwd=REPO, capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
        by_method[method] = [item for item in json.loads(done.stdout)[0]["items"] if item["method"] == "judge"]
    assert all(item["judge_detail"].startswith("likelihood p=") for item in by_method["likelihood"])
    assert not any(item["judge_detail"] for item in by_method["choice"])
    assert all(item["evidence"].startswith("the judge read final_answer, emails: ") for method in by_method
               for item in by_method[method])
    assert [i["probability"] for i in by_method["likelihood"]] != [i["probability"] for i in by_method["choice"]]
    refused = subprocess.run([*command, "--method", "vibes"], cwd=REPO, capture_output=True, text=True)
    assert refused.returncode == 2 and "invalid choice: 'vibes'" in refused.stderr


def test_an_int8_judge_is_another_judge_for_calibrations_and_the_verdict_cache(tmp_path):
    from judge_engine import LLM

    from rubrics.judges.fitted.calibration_file import CalibrationFile
    from rubrics.judges.methods import Calibration
    from rubrics.judges.protocol import EvidenceBlock, JudgeContext, JudgeItem, JudgeRequest

    name = "qwen2.5-coder-0.5b-instruct"   # a model with no int8 calibration shipped
    with pytest.warns(UncalibratedJudgeWarning, match="no calibration fitted for quantization int8"):
        int8 = EmbeddedJudge(name, quantization="int8", method="choice")
    assert int8.identity().quantization == "int8" and int8.methods.named("choice").calibration == IDENTITY
    with pytest.raises(CalibrationFileError, match="judge_model.quantization: expected 'int8'"):
        EmbeddedJudge(name, quantization="int8", calibration=CALIBRATIONS / f"{name}.json")
    fitted = CalibrationFile(int8.identity(), {"choice": Calibration(0.9, -0.4)})
    fitted.write(tmp_path / "int8.json")
    assert "quantization" in json.loads((tmp_path / "int8.json").read_text())["judge_model"]
    assert EmbeddedJudge(name, quantization="int8", calibration=tmp_path / "int8.json").methods.named(
        "choice").calibration == Calibration(0.9, -0.4)
    with pytest.raises(CalibrationFileError, match="judge_model.quantization: expected None"):
        EmbeddedJudge(name, calibration=tmp_path / "int8.json")
    with pytest.raises(CalibrationFileError, match="judge_model.quantization: expected None"):
        EmbeddedJudge(DEFAULT_JUDGE_MODEL, quantization="none",
                      calibration=shipped_calibration_path(DEFAULT_JUDGE_MODEL, "int8"))
    folder = str(tiny_judge_model(str(tmp_path)))
    context = JudgeContext("t", "Write it.", None, (EvidenceBlock("final_answer", "done"),))
    request = JudgeRequest(context, JudgeItem(id="a", kind="criterion", points=1, criterion="is done"))
    keys = [EmbeddedJudge(folder, llm=LLM(folder, quantization=q, dtype="float32", kv_cache_bytes=1 << 24),
                          calibrations={"choice": IDENTITY}).cache_keys([request])[0]
            for q in (None, "int8", "int8-weights")]
    assert None not in keys and len(set(keys)) == 3
    # int8 weights with float activations are a third judge: their calibration is their own
    weights_only = CalibrationFile(replace(int8.identity(), quantization="int8-weights"),
                                   {"choice": Calibration(1.0, 0.0)})
    weights_only.write(tmp_path / "int8-weights.json")
    with pytest.raises(CalibrationFileError, match="judge_model.quantization: expected 'int8'"):
        EmbeddedJudge(name, quantization="int8", calibration=tmp_path / "int8-weights.json")
    broken = json.loads((tmp_path / "int8-weights.json").read_text())
    broken["judge_model"]["quantization"] = "int4"
    (tmp_path / "int4.json").write_text(json.dumps(broken))
    with pytest.raises(CalibrationFileError, match="null or one of \"int8\", \"int8-weights\""):
        EmbeddedJudge(name, quantization="int8", calibration=tmp_path / "int4.json")


def test_grade_quantization_int8_grades_with_int8_linear_maps(tmp_path):
    import subprocess
    import sys

    from judge_models import CFO_RUBRIC, cfo_trajectory_paths

    folder = tiny_judge_model(str(tmp_path))
    command = [sys.executable, "-m", "rubrics.cli.main", "grade", str(CFO_RUBRIC), str(cfo_trajectory_paths()[0]),
               "--model", str(folder), "--format", "json", "--no-cache", "--method", "choice"]
    probabilities = {}
    for extra in ("", "int8", "none"):   # a model outside the catalog runs float32 unless asked
        done = subprocess.run([*command, *(["--quantization", extra] if extra else [])], cwd=REPO,
                              capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
        probabilities[extra] = [i["probability"] for i in json.loads(done.stdout)[0]["items"]
                                if i["method"] == "judge"]
    assert all(p is not None for p in probabilities["int8"])
    assert probabilities["int8"] != probabilities[""] == probabilities["none"]   # the same judgments, in int8
    assert max(abs(a - b) for a, b in zip(probabilities["int8"], probabilities[""])) < 0.2


def test_rubric_grade_runs_the_default_judge_model_in_int8_unless_asked(monkeypatch):
    """The flags as `rubric grade` parses them: no --quantization gives the model's own (int8 for the default),
    --quantization none float32, --quantization int8 on a float32 model int8."""
    from rubrics.cli.main import build_parser
    from rubrics.judges.factory import JudgeSpec, build_judge

    monkeypatch.delenv("RUBRICS_JUDGE_MODEL", raising=False)
    parser = build_parser()

    def identity(*flags):
        args = parser.parse_args(["grade", "rubric.yaml", "t.json", "--no-cache", *flags])
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UncalibratedJudgeWarning)   # the 135M has no int8 calibration
            return build_judge(JudgeSpec.from_args(args)).identity()

    assert identity().quantization == "int8"
    assert identity("--quantization", "none").quantization is None
    assert identity("--model", "smollm2-135m-instruct").quantization is None
    assert identity("--model", "smollm2-135m-instruct", "--quantization", "int8").quantization == "int8"
