"""Calibration files: the format, refusals of files made for another judge (in the library and as `rubric grade`
usage errors, no model needed), the prompt-layout version pinned to the prompts, and the real path:
`rubric judge-eval --fit-calibration --write` then `rubric grade --calibration` on the embedded model."""
from __future__ import annotations

import hashlib
import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from judge_models import LABELS_DIR, REPO
from rubrics.judges.fitted.calibration_file import CalibrationFile, CalibrationFileError, ModelIdentity, \
    calibration_from_dict, load_calibration_file, rubric_calibration_path
from rubrics.judges.methods import METHOD_CLASSES, Calibration

SMOL = ModelIdentity("SmolLM2-135M-Instruct", "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53")
STATEMENT_LAYOUT = METHOD_CLASSES["statement"].layout_version   # the layout content()'s file is fitted for
REFUNDS = LABELS_DIR / "support-refunds"
REFUNDS_RUBRIC = REFUNDS / "rubric.yaml"
REFUNDS_01 = REFUNDS / "trajectories" / "support-refunds-01.json"


def content(**changes) -> dict:
    data = {"format": 1, "judge_model": SMOL.to_dict(), "prompt_layout": STATEMENT_LAYOUT,
            "calibrations": {"statement": {"scale": 0.9, "offset": 1.5}}}
    data.update(changes)
    return data


def write(path: Path, data) -> Path:
    path.write_text(data if isinstance(data, str) else json.dumps(data))
    return path


def rubric(*args, cwd=REPO):
    return subprocess.run([sys.executable, "-m", "rubrics.cli.main", *map(str, args)], capture_output=True,
                          text=True, cwd=cwd, timeout=600)


# ----------------------------------------------------------------------------------------------- the format

def test_a_written_file_reads_back_the_same(tmp_path):
    made = CalibrationFile(SMOL, {"statement": Calibration(0.9, 1.5), "likelihood": Calibration(1.0, -0.25)})
    made.write(tmp_path / "c.json")
    data = json.loads((tmp_path / "c.json").read_text())
    assert data == {"format": 1, "judge_model": SMOL.to_dict(), "prompt_layout": STATEMENT_LAYOUT,
                    "calibrations": {"likelihood": {"scale": 1.0, "offset": -0.25},
                                     "statement": {"scale": 0.9, "offset": 1.5}}}
    loaded = load_calibration_file(tmp_path / "c.json")
    assert loaded == made and loaded.path == str(tmp_path / "c.json")


@pytest.mark.parametrize("data, field", [
    ("{not json", "not JSON"),
    ([1, 2], "(top level)"),
    (content(format=2), "format"),
    (content(judge_model={"weights_sha256": None}), "judge_model.name"),
    (content(judge_model={"name": "m", "weights_sha256": "abc"}), "judge_model.weights_sha256"),
    (content(prompt_layout=3), "prompt_layout"),
    (content(calibrations={}), "calibrations"),
    (content(calibrations={"vibes": {"scale": 1, "offset": 0}}), "calibrations.vibes"),
    (content(calibrations={"statement": {"scale": 1}}), "calibrations.statement"),
    (content(calibrations={"statement": {"scale": "1", "offset": 0}}), "calibrations.statement.scale"),
    (content(calibrations={"statement": {"scale": 1, "offset": float("nan")}}), "calibrations.statement.offset"),
    (content(per_item={}), "per_item"),
])
def test_a_malformed_file_names_its_path_and_the_field(tmp_path, data, field):
    path = write(tmp_path / "bad.json", data)
    with pytest.raises(CalibrationFileError) as error:
        load_calibration_file(path)
    assert str(error.value).startswith(f"{path}: {field}")


def degenerate(scale, offset) -> dict:
    return content(calibrations={"statement": {"scale": 0.9, "offset": 0.1}, "likelihood":
                                 {"scale": scale, "offset": offset}})


DEGENERATE = [   # each makes the verdict ignore (or invert) the judge's score
    (degenerate(0, 50), "calibrations.likelihood.scale", "every item met with probability 1"),
    (degenerate(0, 0), "calibrations.likelihood.scale", "every item at probability 0.5"),
    (degenerate(-1e6, 0), "calibrations.likelihood.scale", "wrong answers met"),
    (degenerate(-0.5, 0.1), "calibrations.likelihood.scale", "an inverted judge"),
    (degenerate(1e-9, 0.1), "calibrations.likelihood.scale", "a flat probability"),
    (degenerate(5e3, 0.1), "calibrations.likelihood.scale", "a step on noise"),
    (degenerate(1.0, 50), "calibrations.likelihood.offset", "met whatever the score"),
    (degenerate(1.0, -21), "calibrations.likelihood.offset", "never met"),
    (degenerate(0.01, 5), "calibrations.likelihood.offset", "the 50 % point at raw score -500"),
]


@pytest.mark.parametrize("data, field, why", DEGENERATE, ids=[d[2] for d in DEGENERATE])
def test_a_degenerate_calibration_is_refused_with_the_file_and_field(tmp_path, data, field, why):
    path = write(tmp_path / "degenerate.json", data)
    with pytest.raises(CalibrationFileError) as error:
        load_calibration_file(path)
    assert str(error.value).startswith(f"{path}: {field}: expected "), why
    value = data["calibrations"]["likelihood"][field.rsplit(".", 1)[1]]
    assert str(error.value).endswith(f"found {value!r}")


def test_the_built_in_calibrations_and_sane_fits_are_accepted():
    built_in = [Calibration(0.7851, 0.0935), Calibration(0.0852, 0.4103), Calibration(0.6358, 0.0197)]  # real fits
    for fitted in (*built_in, Calibration(1e-3, 0.2),
                   Calibration(1000, -20), Calibration(0.1, 20)):
        loaded = calibration_from_dict(content(calibrations={"statement": {"scale": fitted.scale,
                                                                           "offset": fitted.offset}}))
        assert loaded.calibrations["statement"] == fitted


def test_grade_refuses_a_degenerate_calibration_file(tmp_path):
    for number, (data, field, _) in enumerate(DEGENERATE[:3] + DEGENERATE[6:7]):
        path = write(tmp_path / f"degenerate-{number}.json", data)
        refused(rubric("grade", REFUNDS_RUBRIC, REFUNDS_01, "--calibration", path), f"{path}: {field}: expected")


def test_the_rubric_path_is_relative_to_the_rubric_file(tmp_path):
    from rubrics.rubric.load import load_rubric

    source = REFUNDS_RUBRIC.read_text().replace("judge:\n", "judge:\n  calibration: cal/statement.json\n", 1)
    (tmp_path / "r").mkdir()
    loaded = load_rubric(write(tmp_path / "r" / "rubric.yaml", source))
    assert rubric_calibration_path(loaded) == tmp_path / "r" / "cal" / "statement.json"
    assert rubric_calibration_path(load_rubric(REFUNDS_RUBRIC)) is None


# ------------------------------------------------------------------------------- refusals, in the library

def test_the_embedded_judge_takes_a_path_or_a_loaded_file(tmp_path):
    from rubrics.judges.backends.embedded import EmbeddedJudge

    path = write(tmp_path / "c.json", content())
    for given in (path, str(path), load_calibration_file(path)):
        judge = EmbeddedJudge(calibration=given)
        assert judge.methods.named("statement").calibration == Calibration(0.9, 1.5)
        # a method the file has no entry for keeps its built-in calibration
        assert judge.methods.named("likelihood").calibration == METHOD_CLASSES["likelihood"].default_calibration
    explicit = EmbeddedJudge(calibration=path, calibrations={"statement": Calibration(2.0, 0.0)})
    assert explicit.methods.named("statement").calibration == Calibration(2.0, 0.0)


@pytest.mark.parametrize("changes, field, expected, found", [
    ({"judge_model": {"name": "Qwen3-8B", "weights_sha256": None}}, "judge_model.name", SMOL.name, "Qwen3-8B"),
    ({"judge_model": {"name": SMOL.name, "weights_sha256": "0" * 64}}, "judge_model.weights_sha256",
     SMOL.weights_sha256, "0" * 64),
    ({"prompt_layout": "2020-01-01.1"}, "prompt_layout", STATEMENT_LAYOUT, "2020-01-01.1"),
])
def test_a_file_for_another_model_or_layout_is_refused(tmp_path, changes, field, expected, found):
    from rubrics.judges.backends.embedded import EmbeddedJudge

    path = write(tmp_path / "c.json", content(**changes))
    with pytest.raises(CalibrationFileError) as error:
        EmbeddedJudge(calibration=path)
    assert str(error.value).startswith(f"{path}: {field}: expected {expected!r} (the judge's), found {found!r}")


def test_a_judge_method_the_file_has_no_entry_for_is_refused(tmp_path):
    from rubrics.judges.backends.embedded import EmbeddedJudge

    path = write(tmp_path / "c.json", content())
    with pytest.raises(CalibrationFileError, match=r"calibrations: expected an entry for 'likelihood'.*found "
                                                   r"'statement'"):
        EmbeddedJudge(method="likelihood", calibration=path)


def test_a_file_for_the_embedded_default_fits_the_same_weights_loaded_from_their_gguf():
    from judge_engine.loading.weights import resolve_model_path
    from rubrics.judges.backends.embedded import embedded_identity

    assert embedded_identity(None) == SMOL == embedded_identity(str(resolve_model_path(None)))


def test_the_openai_judge_checks_the_served_models_name(tmp_path):
    from rubrics.judges.backends.openai import OpenAIJudge

    data = content(judge_model={"name": "Qwen/Qwen3-8B", "weights_sha256": None},
                   calibrations={"choice": {"scale": 1.1, "offset": 0.2}})
    path = write(tmp_path / "c.json", data)
    judge = OpenAIJudge("http://127.0.0.1:9/v1", model="Qwen/Qwen3-8B", calibration=path)
    assert judge.identity() == ModelIdentity("Qwen/Qwen3-8B", None)
    assert judge.methods.named("choice").calibration == Calibration(1.1, 0.2)
    with pytest.raises(CalibrationFileError, match="judge_model.name: expected 'other'"):
        OpenAIJudge("http://127.0.0.1:9/v1", model="other", calibration=path)
    # an embedded file (with a weights hash) serves the same model behind `rubric serve`: only the name is compared
    assert OpenAIJudge("http://127.0.0.1:9/v1", model=SMOL.name,
                       calibration=calibration_from_dict(content(calibrations={"choice": {"scale": 1, "offset": 0}}))
                       ).calibration_file.judge_model == SMOL


def test_score_without_a_judge_uses_the_rubrics_calibration(tmp_path):
    from rubrics.rubric.compiler import compile_rubric
    from rubrics.rubric.load import load_rubric
    from rubrics.grading.scoring import JudgeChoice

    write(tmp_path / "c.json", content())
    source = REFUNDS_RUBRIC.read_text().replace("judge:\n", "judge:\n  calibration: c.json\n", 1)
    plan = compile_rubric(load_rubric(write(tmp_path / "rubric.yaml", source)))
    judge = JudgeChoice(None)(plan)   # builds the judge score() builds, loads no model
    assert judge.calibration_file.path == str(tmp_path / "c.json")
    assert judge.methods.named("statement").calibration == Calibration(0.9, 1.5)


# -------------------------------------------------------------------- refusals, as usage errors of the CLI

def refused(done, *expected: str) -> None:
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr and "rubric grade: error:" in done.stderr
    for text in expected:
        assert text in done.stderr


def test_grade_refuses_a_file_for_another_model_layout_or_method_or_a_malformed_one(tmp_path):
    cases = {
        "model.json": (content(judge_model={"name": "Qwen3-8B", "weights_sha256": None}), "judge_model.name"),
        "layout.json": (content(prompt_layout="2020-01-01.1"), "prompt_layout: expected"),
        "method.json": (content(calibrations={"likelihood": {"scale": 1, "offset": 0}}),
                        "calibrations: expected an entry for 'statement'"),
        "broken.json": (content(calibrations={"statement": {"scale": "x", "offset": 0}}),
                        "calibrations.statement.scale"),
    }
    for name, (data, field) in cases.items():   # the statement method (the 135M's own is its head)
        path = write(tmp_path / name, data)
        refused(rubric("grade", REFUNDS_RUBRIC, REFUNDS_01, "--calibration", path, "--method", "statement"),
                f"{path}: {field}")
    refused(rubric("grade", REFUNDS_RUBRIC, REFUNDS_01, "--calibration", tmp_path / "missing.json"),
            f"{tmp_path / 'missing.json'}: cannot read")


def test_grade_takes_the_option_over_the_rubrics_file(tmp_path):
    (tmp_path / "cal").mkdir()
    write(tmp_path / "cal" / "rubric-own.json", content(format=7))
    source = REFUNDS_RUBRIC.read_text().replace("judge:\n", "judge:\n  calibration: cal/rubric-own.json\n", 1)
    graded = write(tmp_path / "rubric.yaml", source)
    refused(rubric("grade", graded, REFUNDS_01), f"{tmp_path / 'cal' / 'rubric-own.json'}: format")
    option = write(tmp_path / "option.json", content(prompt_layout="old"))
    done = rubric("grade", graded, REFUNDS_01, "--calibration", option)
    refused(done, f"{option}: prompt_layout")
    assert "rubric-own.json" not in done.stderr


def test_judge_eval_write_needs_fit_calibration(tmp_path):
    done = rubric("judge-eval", REFUNDS / "labels.jsonl", "--rubric", REFUNDS_RUBRIC, "--write", tmp_path / "c.json")
    assert done.returncode == 2 and "--write needs --fit-calibration" in done.stderr


def test_judge_eval_write_keeps_other_methods_of_the_same_judge(tmp_path):
    from rubrics.trust.lifecycle import write_calibration

    class Judge:
        def identity(self):
            return SMOL

    path = write(tmp_path / "c.json", content(calibrations={"likelihood": {"scale": 2, "offset": 1}}))
    write_calibration(str(path), Judge(), {"statement": Calibration(0.5, 0.25)})
    assert load_calibration_file(path).calibrations == {"likelihood": Calibration(2.0, 1.0),
                                                        "statement": Calibration(0.5, 0.25)}
    write(path, content(prompt_layout="old", calibrations={"likelihood": {"scale": 2, "offset": 1}}))
    write_calibration(str(path), Judge(), {"statement": Calibration(0.5, 0.25)})   # another layout: replaced
    assert load_calibration_file(path).calibrations == {"statement": Calibration(0.5, 0.25)}


# ------------------------------------------------------------------------------ the prompt-layout version

# (method, its layout_version) -> fingerprint of that method's prompts for a few items. When a method's prompts
# change, its case fails: bump that method's layout_version (rubrics/judges/methods/<name>.py) and record the new
# fingerprint under it. Only the calibration and head files fitted for that method are then refused. The head
# method's prompt is the choice method's (its layers are read from the head file): the two move together.
LAYOUT_FINGERPRINTS = {
    ("choice", "2026-11-30.1"): "67d6bcc53ce508607eae15eac61c598f89a3ccf1ba20d20051d4cb7ac3dd1212",
    ("head", "2026-11-30.1"): "67d6bcc53ce508607eae15eac61c598f89a3ccf1ba20d20051d4cb7ac3dd1212",
    ("likelihood", "2026-11-30.1"): "55076e91ea31633416f481eaed74458be5e6169733fff60e3c3661c801644273",
    ("statement", "2026-11-30.1"): "09231bed028ad6059e3e54206310ddf0e8e4f9e96eb809d608604aa41d6d46a0",
}


def layout_fingerprint(cls) -> str:
    from rubrics.judges.prompt.prompts import chat_messages
    from rubrics.judges.protocol import EvidenceBlock, JudgeContext, JudgeExample, JudgeItem
    from rubrics.judges.fitted.verdict_head import HeadProbe

    context = JudgeContext("t", "Refund the order.", "Order total $97.49.",
                           (EvidenceBlock("final_answer", "Refunded $97.49."),))
    method = cls.with_calibrations({}, HeadProbe((1,)))   # a head's layers are the file's, not the prompt's
    lines = []
    for mode in ("direct", "reasoned"):
        for penalty in (False, True):
            item = JudgeItem(id="refund", kind="criterion", points=-2 if penalty else 2, criterion="refunds $97.49",
                             penalty=penalty, examples=(JudgeExample("Refunded.", True),), threshold=0.5,
                             method=None, mode=mode, max_tokens=64)
            for spec in method.prompts(item):
                # which hidden states are read is not part of what the prompt shows
                lines.append(repr(spec).replace(", hidden_layers=()", "").replace(", hidden_layers=(1,)", ""))
                lines.append(json.dumps(chat_messages(context, spec.instructions, spec.item,
                                                      content_free=spec.content_free)))
    return hashlib.sha256("\n".join(lines).encode()).hexdigest()


@pytest.mark.parametrize("name", sorted(METHOD_CLASSES))
def test_each_methods_layout_version_changes_with_its_own_prompts(name):
    cls = METHOD_CLASSES[name]
    fingerprint = layout_fingerprint(cls)
    assert LAYOUT_FINGERPRINTS.get((name, cls.layout_version)) == fingerprint, (
        f"the {name} method's prompts changed: bump layout_version in its class ({cls.__module__}) and record "
        f"({name!r}, <new version>): {fingerprint!r} in LAYOUT_FINGERPRINTS; the other methods' files stay valid")


# ---------------------------------------------------------------------------------------------- the real path

@pytest.mark.slow
def test_judge_eval_writes_a_file_that_grade_applies(tmp_path):
    """The real commands on the embedded model: fit on six labels, write, then grade one trajectory with the file
    and with an identity-calibrated file of the same judge; the probabilities are sigmoid(scale * raw + offset)."""
    rows = [json.loads(line) for line in (REFUNDS / "labels.jsonl").read_text().splitlines()[:6]]
    for row in rows:   # the copy lives elsewhere: trajectory paths made absolute
        row["trajectory"] = str(REFUNDS / row["trajectory"])
    labels = write(tmp_path / "labels.jsonl", "".join(json.dumps(row) + "\n" for row in rows))
    written = tmp_path / "calibration.json"
    done = rubric("judge-eval", labels, "--rubric", REFUNDS_RUBRIC, "--method", "statement", "--fit-calibration",
                  "--write", written, "--format", "json")
    assert done.returncode == 0, done.stderr
    fitted = json.loads(done.stdout)["calibration"]["statement"]
    data = json.loads(written.read_text())
    assert data == {"format": 1, "judge_model": SMOL.to_dict(), "prompt_layout": STATEMENT_LAYOUT,
                    "calibrations": {"statement": fitted}}
    identity = write(tmp_path / "identity.json", {**data, "calibrations": {"statement": {"scale": 1, "offset": 0}}})

    def probabilities(calibration: Path) -> dict[str, float]:
        graded = rubric("grade", REFUNDS_RUBRIC, REFUNDS_01, "--calibration", calibration, "--method", "statement",
                        "--format", "json")
        assert graded.returncode == 0, graded.stderr
        [result] = json.loads(graded.stdout)
        return {item["id"]: item["probability"] for item in result["items"] if item["probability"] is not None}

    calibrated, raw = probabilities(written), probabilities(identity)
    assert set(calibrated) == set(raw) and len(raw) == 6
    for item, p in raw.items():
        expected = 1 / (1 + math.exp(-(fitted["scale"] * math.log(p / (1 - p)) + fitted["offset"])))
        assert calibrated[item] == pytest.approx(expected, rel=1e-9, abs=1e-12), item


# -------------------------------------------------------------- the files a rubric names: confined, regular, bounded

@pytest.mark.parametrize(("name", "code", "says"), [
    ("../outside.json", "file-outside", "is outside the rubric's folder"),
    ("/etc/hostname", "file-outside", "is outside the rubric's folder"),
    ("link.json", "file-outside", "is outside the rubric's folder"),      # a symlink to a file outside
    ("fifo.json", "io-error", "a FIFO (named pipe): only regular files are read"),
    ("/dev/zero", "file-outside", "is outside the rubric's folder"),
    ("huge.json", "io-error", "more than the limit of 16777216 bytes"),
])
@pytest.mark.parametrize("field", ["calibration", "head"])
def test_a_rubric_naming_a_file_outside_its_folder_or_not_a_regular_file_is_refused_when_loaded(
        tmp_path, name, code, says, field):
    import os

    from rubrics.rubric.load import analyze_rubric

    folder = tmp_path / "r"
    folder.mkdir()
    write(tmp_path / "outside.json", content())
    (folder / "link.json").symlink_to(tmp_path / "outside.json")
    os.mkfifo(folder / "fifo.json")
    with open(folder / "huge.json", "wb") as huge:
        huge.truncate((16 << 20) + 1)
    source = REFUNDS_RUBRIC.read_text().replace("judge:\n", f"judge:\n  {field}: {name}\n", 1)
    rubric, problems, _ = analyze_rubric(write(folder / "rubric.yaml", source))
    assert rubric is None
    [problem] = [p for p in problems if p.severity == "error"]
    assert problem.code == code and problem.message.startswith(f"judge.{field}: ") and says in problem.message
    assert problem.line > 1   # at the field's own line


def test_a_rubric_file_inside_its_folder_loads_and_a_calibration_option_is_read_bounded(tmp_path):
    from rubrics.rubric.load import load_rubric

    (tmp_path / "cal").mkdir()
    write(tmp_path / "cal" / "c.json", content())
    source = REFUNDS_RUBRIC.read_text().replace("judge:\n", "judge:\n  calibration: cal/../cal/c.json\n", 1)
    assert rubric_calibration_path(load_rubric(write(tmp_path / "rubric.yaml", source))) is not None
    os_fifo = tmp_path / "fifo.json"
    __import__("os").mkfifo(os_fifo)
    done = rubric("grade", REFUNDS_RUBRIC, REFUNDS_01, "--calibration", os_fifo)
    refused(done, "a FIFO (named pipe): only regular files are read")


def test_one_rubric_with_a_bad_judge_file_costs_only_its_own_dataset_lines(tmp_path):
    import json as json_module
    import os

    good = tmp_path / "good.yaml"
    good.write_text("version: 1\nid: good\ntask: t\ncriteria:\n  - {id: says, points: 1, contains: {text: total}}\n")
    bad_folder = tmp_path / "bad"
    bad_folder.mkdir()
    os.mkfifo(bad_folder / "fifo.json")
    bad = bad_folder / "rubric.yaml"
    bad.write_text("version: 1\nid: bad\ntask: t\njudge: {calibration: fifo.json}\n"
                   "criteria:\n  - {id: shows, points: 1, judge: shows the total}\n")
    trajectory = {"id": "t1", "messages": [], "final_answer": "the total is 4"}
    dataset = tmp_path / "data.jsonl"
    dataset.write_text("\n".join(json_module.dumps({"rubric": str(r), "trajectory": trajectory})
                                 for r in (good, bad, good)) + "\n")
    done = rubric("grade", "--dataset", dataset, "--judge", "none", "--format", "jsonl", cwd=tmp_path)
    assert done.returncode == 1, done.stderr
    assert "judge.calibration" in done.stderr and "FIFO" in done.stderr
    lines = [json_module.loads(line) for line in done.stdout.splitlines()]
    assert [line.get("rubric_id") for line in lines if line.get("score") is not None] == ["good", "good"]
