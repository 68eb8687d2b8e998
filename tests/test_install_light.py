"""The light installs, for real, in a fresh virtual environment (no system site-packages, no torch):

- `pip install .` then `.[openai]`: `rubric grade --judge openai` judges the judge items against a local fake
  OpenAI-compatible server on 127.0.0.1, and torch was never installed;
- the README's custom-check plugin, installed with pip next to it, is used by `rubric lint` and `rubric grade`.

The package is installed from a copy of its files, so the working tree gets no build/ folder.
"""
from __future__ import annotations

import json
import math
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.package_copy import copy_package

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[1]
RUBRIC = "examples/cfo-mis/rubric.yaml"
TRAJECTORY = "examples/cfo-mis/trajectories/01-all-gates-pass.json"
JUDGED_ITEMS = 5   # judge items of examples/cfo-mis/rubric.yaml


def run(*command, **options) -> subprocess.CompletedProcess:
    env = {key: value for key, value in os.environ.items() if key not in {"VIRTUAL_ENV", "PYTHONPATH"}}
    return subprocess.run([str(part) for part in command], capture_output=True, text=True, timeout=900,
                          env=env, **options)


def pip_install(venv: Path, *targets) -> None:
    done = run(venv / "bin" / "python", "-m", "pip", "install", "--quiet", *targets)
    assert done.returncode == 0, done.stdout + done.stderr


def installed(venv: Path, distribution: str) -> bool:
    return run(venv / "bin" / "python", "-m", "pip", "show", "--quiet", distribution).returncode == 0


def grade_openai(venv: Path, base_url: str, output: Path) -> subprocess.CompletedProcess:
    return run(venv / "bin" / "rubric", "grade", RUBRIC, TRAJECTORY, "--judge", "openai", "--base-url", base_url,
               "--model", "judge-model", "--format", "json", "--output", output, cwd=REPO)


@pytest.fixture(scope="module")
def light_venv(tmp_path_factory):
    """A fresh venv with the light core only; the copy of the package it was installed from."""
    root = tmp_path_factory.mktemp("light-install")
    package = copy_package(root / "agent-rubrics")
    venv = root / "venv"
    done = run(sys.executable, "-m", "venv", venv)
    assert done.returncode == 0, done.stderr
    assert "include-system-site-packages = false" in (venv / "pyvenv.cfg").read_text()
    pip_install(venv, package)
    return venv, package


@pytest.fixture(scope="module")
def fake_openai_server():
    """Answers every chat completion with P(Yes) = 0.8 in the first token's top log-probabilities."""
    from starlette.applications import Starlette
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    from judge_engine.server.background import BackgroundServer

    requests: list[dict] = []

    async def chat(request):
        requests.append(await request.json())
        top = [{"token": "Yes", "logprob": math.log(0.8)}, {"token": "No", "logprob": math.log(0.2)}]
        return JSONResponse({"id": "c", "object": "chat.completion", "created": 0, "model": "judge-model",
                             "choices": [{"index": 0, "message": {"role": "assistant", "content": "Yes"},
                                          "logprobs": {"content": [{**top[0], "top_logprobs": top}]},
                                          "finish_reason": "length"}]})

    async def models(request):
        return JSONResponse({"object": "list", "data": [{"id": "judge-model", "object": "model"}]})

    app = Starlette(routes=[Route("/v1/chat/completions", chat, methods=["POST"]),
                            Route("/v1/models", models, methods=["GET"])])
    with BackgroundServer(app) as server:
        yield server.url + "/v1", requests


@pytest.fixture(scope="module")
def without_the_extra(light_venv, fake_openai_server, tmp_path_factory):
    """`rubric grade --judge openai` on the light core alone, before the [openai] extra is installed."""
    venv, _ = light_venv
    base_url, _ = fake_openai_server
    return grade_openai(venv, base_url, tmp_path_factory.mktemp("core") / "results.json")


@pytest.fixture(scope="module")
def openai_venv(light_venv, without_the_extra):
    venv, package = light_venv
    pip_install(venv, f"{package}[openai]")
    return venv


def test_the_light_core_has_neither_httpx_nor_torch(light_venv):
    venv, _ = light_venv
    assert installed(venv, "agent-rubrics")
    assert not installed(venv, "httpx") and not installed(venv, "torch")


def test_without_the_extra_judge_items_are_not_evaluated_and_the_error_names_an_install(without_the_extra):
    assert without_the_extra.returncode == 1
    assert "pip install 'agent-rubrics[" in without_the_extra.stderr
    assert "not evaluated" in without_the_extra.stderr


def test_the_error_names_the_openai_extra(without_the_extra):
    assert "pip install 'agent-rubrics[openai]'" in without_the_extra.stderr


def test_the_openai_extra_judges_against_an_openai_compatible_server(openai_venv, fake_openai_server, tmp_path):
    base_url, requests = fake_openai_server
    before = len(requests)
    output = tmp_path / "results.json"
    done = grade_openai(openai_venv, base_url, output)
    assert done.returncode == 0, done.stdout + done.stderr
    [result] = json.loads(output.read_text())
    assert result["complete"] and result["judge"] == "openai:judge-model"
    judged = [item for item in result["items"] if item["method"] == "judge"]
    assert len(judged) == JUDGED_ITEMS
    # the server answers P(Yes) = 0.8; a model outside the catalog gets no other model's calibration
    assert all(item["status"] == "met" and item["probability"] == pytest.approx(0.8) for item in judged)
    assert len(requests) - before == JUDGED_ITEMS
    assert installed(openai_venv, "httpx") and not installed(openai_venv, "torch")
    no_torch = run(openai_venv / "bin" / "python", "-c", "import importlib.util as u; print(u.find_spec('torch'))")
    assert no_torch.stdout.strip() == "None"


def test_the_readme_custom_check_plugin_installs_and_grades(light_venv, tmp_path):
    from test_readme_custom_check import custom_check_files

    venv, _ = light_venv
    blocks = custom_check_files()
    plugin = tmp_path / "plugin"
    module_path = re.fullmatch(r"# (\S+\.py)", blocks["python"].splitlines()[0]).group(1)
    (plugin / module_path).parent.mkdir(parents=True)
    (plugin / module_path).write_text(blocks["python"])
    (plugin / "pyproject.toml").write_text(blocks["toml"])
    pip_install(venv, plugin)

    rubric = tmp_path / "rubric.yaml"
    rubric.write_text("version: 1\nid: custom\ntask: Summarise the Q3 travel spend.\n" + blocks["yaml"])
    lint = run(venv / "bin" / "rubric", "lint", rubric)
    assert lint.returncode == 0, lint.stdout + lint.stderr
    trajectory = tmp_path / "attempt.json"
    trajectory.write_text(json.dumps({"id": "attempt", "messages": [],
                                      "final_answer": "Total travel spend was 48.2L, up 16% on Q2."}))
    graded = run(venv / "bin" / "rubric", "grade", rubric, trajectory, "--judge", "none", "--format", "json")
    assert graded.returncode == 0, graded.stdout + graded.stderr
    [result] = json.loads(graded.stdout)
    assert {item["id"]: item["status"] for item in result["items"]} == {"concise": "met", "not-terse": "met"}
    assert result["score"] == 1.0
