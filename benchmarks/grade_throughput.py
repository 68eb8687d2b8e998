"""Judging throughput of `rubric grade` against a plain transformers loop, on the same prompts and weights.

    python benchmarks/grade_throughput.py [--trajectories 50] [--method NAME] [--threads 2]

1. Builds N CFO trajectories (the example's and the labelled set's, each copy made distinct so that no prompt
   repeats whole) in a temporary folder.
2. Engine: `rubric grade` in-process on them with the embedded judge (one batched engine run); the model load
   is timed apart, the grading time is what the judgments/s figure uses.
3. Baseline: the same judge prompts (token ids from the same EmbeddedJudge.build_prompts) graded item by item
   through transformers' AutoModelForCausalLM on the same converted weights: one forward per prompt of each
   item's method (for the likelihood method, prompt + statement, each distinct content-free baseline once, as the
   engine does), and the method's own verdict() on the scores.
4. Prints judgments/s of both, the speed-up (target: at least 5x), and the largest probability difference
   between the two (they should agree to float precision).
5. With --panel A,B: a two-member embedded panel (methods A and B sharing one engine batch) against one judge
   with method A, each on a fresh engine: computed prompt tokens and item judgments per second of both, and the
   ratios. --skip-baseline leaves out steps 3 and 4.
"""
from __future__ import annotations

import argparse
import json
import math
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
RUBRIC = REPO / "examples" / "cfo-mis" / "rubric.yaml"
SOURCES = [REPO / "examples" / "cfo-mis" / "trajectories", REPO / "examples" / "labels" / "cfo-mis" / "trajectories"]


def distinct_trajectories(count: int, prefix: str) -> list[dict]:
    """`count` CFO trajectories (the example's and the labelled set's, in turn), ids PREFIX-000..., each with its
    own note at the end of its final answer, so that no prompt repeats whole."""
    sources = sorted(p for d in SOURCES for p in d.glob("*.json"))
    made = []
    for index in range(count):
        data = json.loads(sources[index % len(sources)].read_text())
        if isinstance(data, list):  # bare OpenAI messages
            data = {"messages": data}
        data["id"] = f"{prefix}-{index:03d}"
        note = f"\n(Run {index}: prepared from the finance share on day {index % 28 + 1}.)"
        data["final_answer"] = (data.get("final_answer") or data["messages"][-1].get("content") or "") + note
        made.append(data)
    return made


def make_trajectories(folder: Path, count: int) -> list[Path]:
    paths = []
    for data in distinct_trajectories(count, "bench"):
        path = folder / f"{data['id']}.json"
        path.write_text(json.dumps(data))
        paths.append(path)
    return paths


def engine_run(folder: Path, method: str, threads: int) -> tuple[float, float, int, object, list]:
    import torch

    import rubrics
    from rubrics.judges.backends.embedded import EmbeddedJudge

    torch.set_num_threads(threads)
    started = time.perf_counter()
    judge = EmbeddedJudge(method=method)
    judge.builder  # loads the engine, the weights and the tokenizer
    load_s = time.perf_counter() - started
    paths = sorted(folder.glob("*.json"))
    started = time.perf_counter()
    results = rubrics.score_many(paths, RUBRIC, judge=judge)
    grade_s = time.perf_counter() - started
    judgments = sum(1 for r in results for i in r.items if i.method == "judge" and i.status != "error")
    return load_s, grade_s, judgments, judge, results


def panel_comparison(folder: Path, methods: list[str], threads: int, rounds: int = 2) -> None:
    """One judge (methods[0]) and the panel of methods, each on a fresh engine over the same trajectories,
    alternated `rounds` times; the fastest round of each counts (a shared machine slows some rounds down)."""
    import torch

    import rubrics
    from rubrics.judges.backends.embedded import EmbeddedJudge
    from rubrics.judges.panel.judge import PanelJudge, PanelMember

    torch.set_num_threads(threads)
    paths = sorted(folder.glob("*.json"))
    best: dict[str, tuple[float, int, int, int]] = {}   # label -> (seconds, items, computed, prompt tokens)
    for _ in range(rounds):
        for label in ("one judge", "panel"):
            judge = EmbeddedJudge(method=methods[0])
            judge.builder  # the model loads before the clock starts
            graded = judge if label == "one judge" else PanelJudge([PanelMember(judge, m) for m in methods])
            started = time.perf_counter()
            results = rubrics.score_many(paths, RUBRIC, judge=graded)
            seconds = time.perf_counter() - started
            items = sum(1 for r in results for i in r.items if i.method == "judge" and i.status != "error")
            stats = judge.stats()
            if label not in best or seconds < best[label][0]:
                best[label] = (seconds, items, stats["computed_prompt_tokens"], stats["prompt_tokens"])
    for label, (seconds, items, computed, prompt) in best.items():
        name = methods[0] if label == "one judge" else f"panel of {' + '.join(methods)}"
        print(f"{label:9}: {name}: {items} items in {seconds:.1f}s = {items / seconds:.2f} items/s, "
              f"computed {computed} of {prompt} prompt tokens (fastest of {rounds} rounds)")
    one, panel = best["one judge"], best["panel"]
    print(f"panel / one judge: computed prompt tokens x{panel[2] / one[2]:.2f}, "
          f"items/s x{(panel[1] / panel[0]) / (one[1] / one[0]):.2f} "
          f"(the members judged apart would compute about x{len(methods)} the tokens)")


def transformers_run(judge, folder: Path, threads: int, limit: int | None) -> tuple[float, int, dict]:
    """Item by item: one forward per judge prompt on AutoModelForCausalLM over the same weights."""
    import torch
    from transformers import AutoModelForCausalLM

    import rubrics
    from judge_engine.loading.loader import model_folder
    from rubrics.rubric.compiler import compile_rubric
    from rubrics.judges.methods import ScoredPrompt

    torch.set_num_threads(threads)
    model = AutoModelForCausalLM.from_pretrained(str(model_folder(judge.llm.model_path)),
                                                 dtype=torch.float32).eval()
    plan = compile_rubric(rubrics.load_rubric(RUBRIC))
    requests = [r for p in sorted(folder.glob("*.json")) for r in plan.judge_requests(rubrics.load_trajectory(p))]
    requests = requests[:limit] if limit else requests
    planned = judge.build_prompts(requests)

    def choice_logprobs(prompt: list[int], choices: list[list[int]]) -> list[float]:
        if all(len(c) == 1 for c in choices):  # one forward gives every single-token choice
            with torch.no_grad():
                logits = model(torch.tensor([prompt])).logits[0, -1].float()
            lp = torch.log_softmax(logits, -1)
            return [lp[c[0]].item() for c in choices]
        values = []
        for choice in choices:
            with torch.no_grad():
                logits = model(torch.tensor([prompt + choice])).logits[0].float()
            lp = torch.log_softmax(logits[len(prompt) - 1:-1], -1)
            values.append(sum(lp[i, t].item() for i, t in enumerate(choice)))
        return values

    probabilities: dict[tuple[str, str], float] = {}
    seen: dict[tuple, list[float]] = {}   # identical prompts (content-free baselines) are scored once
    started = time.perf_counter()
    for p in planned:
        if p.error is not None:
            continue
        scored = []
        for index in range(len(p.specs)):
            ids, choices = p.ids(index), p.choices[index]
            key = (tuple(ids), tuple(map(tuple, choices)))
            if key not in seen:
                seen[key] = choice_logprobs(ids, choices)
            scored.append(ScoredPrompt(tuple(seen[key]), tuple(map(len, choices))))
        verdict = p.method.verdict(p.request.item, scored)
        probabilities[(p.request.context.trajectory_id, p.request.item.id)] = verdict.probability
    return time.perf_counter() - started, len(requests), probabilities


def main() -> int:
    from rubrics.judges.methods import DEFAULT_METHOD, METHOD_NAMES

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--trajectories", type=int, default=50)
    parser.add_argument("--method", choices=METHOD_NAMES, default=None,
                        help="verdict method (default: the embedded judge's default)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--baseline-limit", type=int, default=None,
                        help="grade only the first N prompts with transformers and extrapolate the rate")
    parser.add_argument("--panel", metavar="A,B",
                        help="also compare a panel of these embedded methods with one judge (the first method)")
    parser.add_argument("--skip-baseline", action="store_true", help="leave out the transformers comparison")
    args = parser.parse_args()
    panel = args.panel.split(",") if args.panel else None
    if panel and (len(panel) < 2 or any(m not in METHOD_NAMES for m in panel)):
        parser.error(f"--panel: expected two or more of {', '.join(METHOD_NAMES)}, comma-separated")

    method = args.method or DEFAULT_METHOD
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        make_trajectories(folder, args.trajectories)
        if panel:
            panel_comparison(folder, panel, args.threads)
        if args.skip_baseline:
            return 0
        load_s, grade_s, judgments, judge, results = engine_run(folder, method, args.threads)
        stats = judge.stats()
        engine_rate = judgments / grade_s
        print(f"engine: {args.trajectories} trajectories, {judgments} judgments ({method}) in {grade_s:.1f}s "
              f"= {engine_rate:.2f} judgments/s (model load {load_s:.1f}s apart)")
        print(f"engine: prompt_tokens={stats['prompt_tokens']} computed={stats['computed_prompt_tokens']} "
              f"ratio={stats['computed_prompt_tokens'] / max(1, stats['prompt_tokens']):.3f} "
              f"prefix_cache_hit_rate={stats['prefix_cache_hit_rate']:.3f}")
        hf_s, hf_count, hf_probs = transformers_run(judge, folder, args.threads, args.baseline_limit)
        hf_rate = hf_count / hf_s
        print(f"transformers item by item: {hf_count} judgments in {hf_s:.1f}s = {hf_rate:.2f} judgments/s")
        engine_probs = {(r.trajectory_id, i.id): i.probability for r in results for i in r.items
                        if i.method == "judge"}
        diffs = [abs(engine_probs[k] - p) for k, p in hf_probs.items() if engine_probs.get(k) is not None]
        print(f"max |p_engine - p_transformers| over {len(diffs)} judgments: {max(diffs, default=math.nan):.2e}")
        speedup = engine_rate / hf_rate
        print(f"speed-up: {speedup:.1f}x (target >= 5x): {'PASS' if speedup >= 5 else 'BELOW TARGET'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
