"""What the `rubric view` tests share: headless Debian chromium, a parsed DOM to assert on, a scripted
OpenAI-compatible judge for real `rubric grade` runs, and the real CLI in a subprocess.

Chromium is driven with --dump-dom (the DOM after the page's script ran, within a virtual-time budget) and
--screenshot; the page takes its filters and routes from the URL's fragment, so a URL is a state to check.
"""
from __future__ import annotations

import hashlib
import math
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
needs_chromium = pytest.mark.skipif(
    CHROMIUM is None, reason="Debian's chromium is not installed (apt-get install chromium; .ci/run installs it)")

CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync",
                  "--disable-extensions", "--hide-scrollbars", "--mute-audio"]


def chromium(args: list[str], profile: Path) -> subprocess.CompletedProcess:
    profile.mkdir(parents=True, exist_ok=True)
    return subprocess.run([CHROMIUM, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", *args], capture_output=True,
                          text=True, timeout=180)


def dump_dom(url: str, profile: Path, budget_ms: int = 8000) -> "Element":
    done = chromium([f"--virtual-time-budget={budget_ms}", "--dump-dom", url], profile)
    assert done.returncode == 0, done.stderr[-2000:]
    return parse_dom(done.stdout)


def screenshot(url: str, out: Path, profile: Path, size: tuple[int, int] = (1400, 1000)) -> Path:
    out.parent.mkdir(parents=True, exist_ok=True)
    done = chromium(["--virtual-time-budget=8000", f"--window-size={size[0]},{size[1]}", f"--screenshot={out}", url],
                    profile)
    assert done.returncode == 0 and out.exists(), done.stderr[-2000:]
    return out


# ---- a small DOM to assert on -------------------------------------------------------------------------------

VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"}


@dataclass
class Element:
    tag: str
    attrs: dict[str, str]
    children: list = field(default_factory=list)   # Element or str

    def iter(self):
        yield self
        for child in self.children:
            if isinstance(child, Element):
                yield from child.iter()

    def find_all(self, tag: str | None = None, **attrs: str) -> list["Element"]:
        wanted = {k.rstrip("_").replace("_", "-"): v for k, v in attrs.items()}
        return [e for e in self.iter() if (tag is None or e.tag == tag)
                and all(e.attrs.get(k) == v for k, v in wanted.items())]

    def find(self, tag: str | None = None, **attrs: str) -> "Element":
        found = self.find_all(tag, **attrs)
        assert found, f"no <{tag or '*'}> with {attrs}"
        return found[0]

    def text(self) -> str:
        return "".join(c if isinstance(c, str) else c.text() for c in self.children)

    def has_class(self, name: str) -> bool:
        return name in self.attrs.get("class", "").split()


class _Builder(HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.root = Element("#document", {})
        self.stack = [self.root]

    def handle_starttag(self, tag, attrs):
        element = Element(tag, {k: v if v is not None else "" for k, v in attrs})
        self.stack[-1].children.append(element)
        if tag not in VOID:
            self.stack.append(element)

    def handle_endtag(self, tag):
        for depth in range(len(self.stack) - 1, 0, -1):
            if self.stack[depth].tag == tag:
                del self.stack[depth:]
                return

    def handle_data(self, data):
        self.stack[-1].children.append(data)


def parse_dom(text: str) -> Element:
    builder = _Builder()
    builder.feed(text)
    builder.close()
    return builder.root


# ---- the real CLI --------------------------------------------------------------------------------------------

def rubric(*args: str, check: bool = True, cwd: Path = REPO, cache: Path | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO), "RUBRICS_OPENAI_API_KEY": "test-key"}
    if cache is not None:   # a verdict cache of this run's own: no other test's verdicts answer for this judge
        env["RUBRICS_VERDICT_CACHE"] = str(cache)
    done = subprocess.run([sys.executable, "-m", "rubrics.cli.main", *args], capture_output=True, text=True,
                          cwd=cwd, env=env, timeout=600)
    if check:
        assert done.returncode == 0, f"rubric {' '.join(args)}: rc {done.returncode}\n{done.stderr[-3000:]}"
    return done


# ---- a scripted OpenAI-compatible judge -----------------------------------------------------------------------

def scripted_probability(text: str, run: str) -> float:
    """A probability fixed by the prompt (so a rerun agrees) and shifted by the run's name, so two runs differ a
    little the way two policies or two judges do."""
    digest = int(hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:8], 16) / 0xFFFFFFFF
    shift = {"a": 0.0, "b": 0.12}.get(run, 0.0)
    return min(0.97, max(0.03, 0.05 + 0.9 * digest + shift))


def chat_answer(p_yes: float) -> dict:
    top = [{"token": "Yes", "logprob": math.log(p_yes * 0.95)},
           {"token": "No", "logprob": math.log((1 - p_yes) * 0.95)}, {"token": "yes", "logprob": math.log(0.05)}]
    top.sort(key=lambda e: -e["logprob"])
    return {"id": "c", "object": "chat.completion", "created": 0, "model": "m",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": top[0]["token"]},
                         "logprobs": {"content": [{**top[0], "top_logprobs": top}]}, "finish_reason": "length"}],
            "usage": {"prompt_tokens": 200, "completion_tokens": 1, "total_tokens": 201,
                      "prompt_tokens_details": {"cached_tokens": 150}}}


def judge_app():
    """Starlette app answering /{run}/v1/chat/completions with scripted_probability of the prompt."""
    from starlette.applications import Starlette
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    async def chat(request):
        body = await request.json()
        text = "\n".join(str(m.get("content")) for m in body["messages"])
        return JSONResponse(chat_answer(scripted_probability(text, request.path_params["run"])))

    async def models(request):
        return JSONResponse({"object": "list", "data": [{"id": "m", "object": "model"}]})

    return Starlette(routes=[Route("/{run}/v1/chat/completions", chat, methods=["POST"]),
                             Route("/{run}/v1/models", models, methods=["GET"])])


def judge_args(base_url: str, run: str) -> list[str]:
    return ["--judge", "openai", "--base-url", f"{base_url}/{run}/v1", "--model", "m", "--no-cache"]


# ---- real runs of the bundled example ------------------------------------------------------------------------

EXAMPLE = REPO / "examples" / "cfo-mis"
LABELS = REPO / "examples" / "labels" / "cfo-mis" / "labels.jsonl"


@dataclass(frozen=True)
class GradedRuns:
    a: Path                 # `rubric grade` JSON lines, scripted judge "a"
    b: Path                 # the same trajectories, scripted judge "b" (a second policy, rubric or judge)
    judge_eval: Path        # `rubric judge-eval --json OUT`
    trajectories: Path
    rubric: Path


def grade_example_runs(folder: Path) -> GradedRuns:
    from judge_engine.server.background import BackgroundServer

    folder.mkdir(parents=True, exist_ok=True)
    runs = GradedRuns(a=folder / "run-a.jsonl", b=folder / "run-b.jsonl", judge_eval=folder / "judge-eval.json",
                      trajectories=EXAMPLE / "trajectories", rubric=EXAMPLE / "rubric.yaml")
    with BackgroundServer(judge_app()) as server:
        for name, out in (("a", runs.a), ("b", runs.b)):
            rubric("grade", str(runs.rubric), str(runs.trajectories), *judge_args(server.url, name),
                   "--format", "jsonl", "--output", str(out))
        rubric("judge-eval", str(LABELS), "--rubric", str(runs.rubric), "--judge", "openai", "--base-url",
               f"{server.url}/a/v1", "--model", "m", "--json", str(runs.judge_eval), cache=folder / "verdicts.sqlite")
    return runs


@pytest.fixture(scope="module")
def example_runs(tmp_path_factory) -> GradedRuns:
    return grade_example_runs(tmp_path_factory.mktemp("runs"))


def read_results(path: Path) -> list[dict]:
    import json

    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


# ---- generated and hostile inputs ------------------------------------------------------------------------------

TAG_TOTALS = {"accuracy": 5, "style": 3}   # the positive points of each tag's criteria below


def generated_results(n: int, seed: int = 7) -> list[dict]:
    """n plausible results of one rubric (a gate, six criteria, one a penalty, two tags), some incomplete, made
    through the Result model so they are what `rubric grade` could write."""
    import random

    from rubrics.result import ItemResult, Result, TagScore

    rng = random.Random(seed)
    criteria = [("c1", 3, "accuracy"), ("c2", 2, "accuracy"), ("c3", 2, "style"), ("c4", 1, "style"),
                ("c5", 2, None), ("c6", -2, None)]
    out = []
    for i in range(n):
        gate_met = rng.random() > 0.15
        items = [ItemResult(id="gate", kind="gate", text="the report was sent", status="met" if gate_met else "unmet",
                            method="code", evidence=f"email #1 {'found' if gate_met else 'missing'}")]
        earned = uncertain = 0
        errored = rng.random() < 0.03
        tag_earned: dict[str, int] = {"accuracy": 0, "style": 0}
        for j, (cid, points, tag) in enumerate(criteria):
            p = rng.random()
            if errored and j == 5:
                items.append(ItemResult(id=cid, kind="criterion", points=points, status="error", method="judge",
                                        evidence="", error="judge failed: timeout", tags=[tag] if tag else []))
                continue
            met = p >= 0.5
            band = 0.35 <= p <= 0.65
            uncertain += band
            earned += points if met else 0
            if tag and met:
                tag_earned[tag] += points
            items.append(ItemResult(id=cid, kind="criterion", points=points, status="met" if met else "unmet",
                                    method="judge", probability=p, uncertain=band, tags=[tag] if tag else [],
                                    evidence=f"the judge read final_answer: {'met' if p >= 0.5 else 'unmet'} "
                                                             f"at {p:.2f} (threshold 0.5)"))
        total = sum(p for _, p, _ in criteria if p > 0)
        score = max(0, earned) / total if gate_met else 0.0
        out.append(Result(
            trajectory_id=f"traj-{i:04d}", task_id=f"task-{i % 20:02d}", rubric_id="generated", score=score,
            gates_passed=gate_met, earned=earned, total=total, complete=not errored, items=items,
            errors=["c6: judge failed: timeout"] if errored else [], judge="openai:m",
            expected_score=None if errored else score, score_low=None if errored else score,
            score_high=None if errored else score, uncertain_items=uncertain,
            tags={t: TagScore(earned=e, total=TAG_TOTALS[t], score=max(0, e) / TAG_TOTALS[t], complete=not errored)
                  for t, e in tag_earned.items()},
            reward=None if errored else score).to_dict())
    return out


PWNED = "data-pwned"
ATTACKS = [
    f'<script>document.body.setAttribute("{PWNED}","script")</script>',
    f"<img src=x onerror=\"document.body.setAttribute('{PWNED}','img')\">",
    f"<a href=\"javascript:document.body.setAttribute('{PWNED}','link')\">click me</a>",
    f"<svg onload=\"document.body.setAttribute('{PWNED}','svg')\"></svg>",
    f"<iframe src=\"javascript:parent.document.body.setAttribute('{PWNED}','iframe')\"></iframe>",
    f'</script><script>document.body.setAttribute("{PWNED}","close")</script>',
    '"><style>body{display:none}</style><b x="',
    "javascript:alert(1)",
    "safe \u202egnp.exe\u202c and \u2066isolated\u2069 text",
]
HOSTILE_TEXT = "\n".join(ATTACKS)
TEN_MB = 10 * 1024 * 1024

