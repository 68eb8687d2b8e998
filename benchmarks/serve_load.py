"""Load on `rubric serve`: 64 concurrent clients versus the same requests sent one at a time, in one run.

The requests are the judge prompts of examples/cfo-mis (the shared prompt layout of rubrics/judges/prompt/prompts.py)
as chat completions with top log-probabilities, cycled to --requests and decoding --max-tokens tokens each, so
both the prefix cache and decode batching matter. Each phase puts its own tag at the start of the system turn,
so neither phase finds the other's prompts in the prefix cache.

    python benchmarks/serve_load.py [--clients 64] [--requests 64] [--max-tokens 16] [--threads 2]
                                    [--model PATH] [--url http://127.0.0.1:8000]   (an already running server)

Prints, per phase: requests answered, wall time, requests/s, p50 and p99 latency, completion tokens/s, and the
engine's peak running sequences (GET /metrics); then the concurrent/sequential throughput ratio. Exits 1 when
a request is not answered or the concurrent phase never ran more than one sequence in a batch.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
SERVED = "judge"


def judge_messages(count: int, tag: str) -> list[list[dict]]:
    from rubrics.rubric.compiler import compile_rubric
    from rubrics.judges.prompt import prompts
    from rubrics.judges.methods import ChoiceMethod
    from rubrics.rubric.load import load_rubric
    from rubrics.trajectory import load_trajectory

    cfo = ROOT / "examples" / "cfo-mis"
    plan = compile_rubric(load_rubric(cfo / "rubric.yaml"))
    requests = [r for path in sorted((cfo / "trajectories").glob("*.json"))
                for r in plan.judge_requests(load_trajectory(path))]
    conversations = []
    for i in range(count):
        request = requests[i % len(requests)]
        spec, = ChoiceMethod().prompts(request.item)   # what OpenAIJudge sends for a direct item
        messages = prompts.chat_messages(request.context, spec.instructions, spec.item)
        conversations.append([{**messages[0], "content": f"[{tag}] {messages[0]['content']}"}, *messages[1:]])
    return conversations


def payload(messages: list[dict], max_tokens: int) -> dict:
    return {"model": SERVED, "messages": messages, "max_tokens": max_tokens, "temperature": 0, "logprobs": True,
            "top_logprobs": 5}


async def one_request(base: str, body: dict) -> tuple[float, int]:
    async with httpx.AsyncClient(base_url=base, timeout=600) as client:   # one client each, like separate workers
        started = time.perf_counter()
        response = await client.post("/v1/chat/completions", json=body)
        response.raise_for_status()
        return time.perf_counter() - started, response.json()["usage"]["completion_tokens"]


async def run_phase(base: str, bodies: list[dict], clients: int) -> tuple[float, list[float], int, int]:
    """(wall seconds, latencies of the answered requests, completion tokens, failures) with `clients` in flight."""
    gate = asyncio.Semaphore(clients)

    async def gated(body: dict):
        async with gate:
            return await one_request(base, body)

    started = time.perf_counter()
    results = await asyncio.gather(*(gated(body) for body in bodies), return_exceptions=True)
    wall = time.perf_counter() - started
    answered = [r for r in results if not isinstance(r, BaseException)]
    for failure in [r for r in results if isinstance(r, BaseException)][:3]:
        print(f"  failed: {type(failure).__name__}: {failure}", file=sys.stderr)
    return wall, [latency for latency, _ in answered], sum(tokens for _, tokens in answered), \
        len(results) - len(answered)


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


def report(name: str, wall: float, latencies: list[float], tokens: int, failures: int, metrics: dict) -> float:
    rps = len(latencies) / wall
    print(f"{name:<11} answered {len(latencies)}/{len(latencies) + failures}  wall {wall:7.2f}s  "
          f"{rps:6.2f} req/s  p50 {percentile(latencies, 0.5):6.2f}s  p99 {percentile(latencies, 0.99):6.2f}s  "
          f"{tokens / wall:7.1f} completion tok/s  peak running seqs {metrics['server']['peak_running_seqs']}")
    return rps


def measure(base: str, args: argparse.Namespace) -> int:
    metrics = lambda: httpx.get(base + "/metrics", timeout=30).json()  # noqa: E731
    asyncio.run(run_phase(base, [payload(judge_messages(1, "warm-up")[0], 2)], 1))
    sequential = [payload(m, args.max_tokens) for m in judge_messages(args.requests, "sequential")]
    concurrent = [payload(m, args.max_tokens) for m in judge_messages(args.requests, "concurrent")]
    print(f"{args.requests} chat requests (CFO judge prompts, max_tokens={args.max_tokens}, top_logprobs=5)")
    wall, latencies, tokens, failed_one = asyncio.run(run_phase(base, sequential, 1))
    rps_one = report("sequential", wall, latencies, tokens, failed_one, metrics())
    wall, latencies, tokens, failed_many = asyncio.run(run_phase(base, concurrent, args.clients))
    after = metrics()
    rps_many = report(f"{args.clients} clients", wall, latencies, tokens, failed_many, after)
    engine = after["engine"]
    print(f"concurrent / sequential throughput: {rps_many / rps_one:.2f}x; engine prefix-cache hit rate "
          f"{engine.get('prefix_cache_hit_rate', 0):.2f}, preemptions {engine.get('preemptions')}")
    ok = failed_one == failed_many == 0 and after["server"]["peak_running_seqs"] > 1
    if not ok:
        print("FAILED: unanswered requests, or the engine never batched requests together", file=sys.stderr)
    return 0 if ok else 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", type=int, default=64)
    parser.add_argument("--requests", type=int, default=64)
    parser.add_argument("--max-tokens", type=int, default=16)
    parser.add_argument("--threads", type=int, default=2, help="torch threads of the server")
    parser.add_argument("--model", help="model for rubric serve (default: the embedded SmolLM2-135M)")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--url", help="measure an already running `rubric serve --served-model-name judge`")
    args = parser.parse_args()
    if args.url:
        return measure(args.url.rstrip("/").removesuffix("/v1"), args)
    from judge_engine.server.background import ServerProcess, free_port

    port = free_port()
    command = [sys.executable, "-m", "rubrics.cli.main", "serve", "--host", "127.0.0.1", "--port", str(port),
               "--served-model-name", SERVED, "--threads", str(args.threads), "--device", args.device,
               "--max-num-seqs", str(max(args.clients, 1))]
    if args.model:
        command += ["--model", args.model]
    with tempfile.TemporaryDirectory() as folder, ServerProcess(command, port, f"{folder}/serve.log") as server:
        return measure(server.url, args)


if __name__ == "__main__":
    sys.exit(main())
