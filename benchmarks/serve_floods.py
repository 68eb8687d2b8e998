"""`rubric serve` under three floods: does a well-behaved client keep its latency?

A probe client sends one short chat request at a time (a fresh connection each, with the API key), first on an
idle server, then during each flood, in the same run against the same server:

- **tokenizer**: 4 clients post prompts of nearly 4 MiB of text, one after another, without pause;
- **connections**: 128 idle connections from the probe's own address and 128 from each of four more, never
  sending a byte and reopened as soon as the server closes them (the global cap of 512 full of strangers);
- **long prompt**: one client posts prompts of 8,191 token ids (fewer when the context is shorter; each one new,
  so the prefix cache never helps) with max_tokens 1, one after another.

    python benchmarks/serve_floods.py [--probes 30] [--max-tokens 4] [--threads 1] [--model NAME|PATH]
                                      [--floods tokenizer connections long-prompt] [--serve-option=--OPTION=VALUE]

Prints, per phase: probes answered, p50 and p99 latency, and p99 against the unloaded p99 (target: within 3x);
and what the flood got (its requests answered, refused, or connections held). Exits 1 when a probe is not
answered. The figures depend on the model and the CPU: a step that computes a long prompt's chunk beside the
probe costs what the chunk's tokens cost (judge_engine/engine/step_budget.py keeps that chunk small).
"""

from __future__ import annotations

import argparse
import json
import socket
import statistics
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field

import httpx

from serve_load import SERVED, percentile  # benchmarks/ is on sys.path when run as a script

API_KEY = "flood-benchmark-key"
PROBE = [{"role": "user", "content": "Is 17 a prime number? Answer Yes or No."}]


@dataclass
class Flood:
    """A background load: `run(stop)` until stop is set; counts what it got."""
    name: str
    answered: int = 0
    refused: int = 0
    failed: int = 0
    notes: list[str] = field(default_factory=list)
    threads: list[threading.Thread] = field(default_factory=list)


def probe_latencies(base: str, count: int, max_tokens: int) -> tuple[list[float], int]:
    latencies, failures = [], 0
    body = {"model": SERVED, "messages": PROBE, "max_tokens": max_tokens, "temperature": 0}
    for _ in range(count):
        started = time.perf_counter()
        try:   # a fresh connection each time: a new client of the flooded address
            response = httpx.post(base + "/v1/chat/completions", json=body, timeout=600,
                                  headers={"Authorization": f"Bearer {API_KEY}"})
            response.raise_for_status()
            latencies.append(time.perf_counter() - started)
        except httpx.HTTPError as error:
            failures += 1
            print(f"  probe failed: {type(error).__name__}: {str(error)[:200]}", file=sys.stderr)
    return latencies, failures


def tokenizer_flood(base: str, stop: threading.Event) -> Flood:
    flood = Flood("tokenizer")
    text = "lorem ipsum dolor sit amet " * (4_000_000 // 27)
    body = json.dumps({"model": SERVED, "messages": [{"role": "user", "content": text}], "max_tokens": 1}).encode()
    headers = {"Authorization": f"Bearer {API_KEY}", "Content-Type": "application/json"}

    def client() -> None:
        with httpx.Client(base_url=base, timeout=600, headers=headers) as http:
            while not stop.is_set():
                try:   # encoded once: the flood's clients should cost the machine little besides the sending
                    status = http.post("/v1/chat/completions", content=body).status_code
                except httpx.HTTPError:
                    flood.failed += 1
                    continue
                flood.answered += status == 200
                flood.refused += status != 200

    flood.threads = [threading.Thread(target=client, daemon=True) for _ in range(4)]
    return flood


def connection_flood(host: str, port: int, stop: threading.Event) -> Flood:
    flood = Flood("connections")
    addresses = ["127.0.0.1", "127.0.0.2", "127.0.0.3", "127.0.0.4", "127.0.0.5"]

    def holder(address: str) -> None:
        held: list[socket.socket] = []
        while not stop.is_set():
            for sock in list(held):   # reopen the ones the server closed
                sock.setblocking(False)
                try:
                    if sock.recv(1) == b"":
                        held.remove(sock)
                        sock.close()
                except BlockingIOError:
                    pass
                except OSError:
                    held.remove(sock)
                    sock.close()
            while len(held) < 128 and not stop.is_set():
                try:
                    held.append(socket.create_connection((host, port), timeout=5, source_address=(address, 0)))
                    flood.answered += 1   # connections opened
                except OSError:
                    flood.failed += 1
                    break
            stop.wait(0.2)
        for sock in held:
            sock.close()

    flood.threads = [threading.Thread(target=holder, args=(a,), daemon=True) for a in addresses]
    flood.notes.append("answered = connections opened (the server closes strangers for newcomers)")
    return flood


def long_prompt_flood(base: str, stop: threading.Event, max_model_len: int) -> Flood:
    flood = Flood("long prompt")

    def client() -> None:
        round_ = 0
        with httpx.Client(base_url=base, timeout=600, headers={"Authorization": f"Bearer {API_KEY}"}) as http:
            while not stop.is_set():
                round_ += 1
                ids = [100 + (i * 7919 + round_ * 104729) % 20000 for i in range(min(max_model_len, 8192) - 1)]
                try:
                    status = http.post("/v1/completions", json={"model": SERVED, "prompt": ids,
                                                                "max_tokens": 1}).status_code
                except httpx.HTTPError:
                    flood.failed += 1
                    continue
                flood.answered += status == 200
                flood.refused += status != 200

    flood.threads = [threading.Thread(target=client, daemon=True)]
    return flood


def run_flood(flood: Flood, stop: threading.Event, base: str, args: argparse.Namespace,
              unloaded_p99: float) -> bool:
    for thread in flood.threads:
        thread.start()
    time.sleep(args.settle)
    latencies, failures = probe_latencies(base, args.probes, args.max_tokens)
    stop.set()
    for thread in flood.threads:
        thread.join(timeout=900)
    p50, p99 = (percentile(latencies, 0.5), percentile(latencies, 0.99)) if latencies else (float("nan"),) * 2
    print(f"{flood.name:<12} probes {len(latencies)}/{args.probes}  p50 {p50:6.3f}s  "
          f"p99 {p99:6.3f}s  p99/unloaded p99 {p99 / unloaded_p99:5.2f}x (target <= 3x)  "
          f"flood: answered {flood.answered}, refused {flood.refused}, failed {flood.failed}"
          + (f"  ({'; '.join(flood.notes)})" if flood.notes else ""))
    return failures == 0


def measure(base: str, host: str, port: int, args: argparse.Namespace) -> int:
    with httpx.Client(base_url=base, timeout=60, headers={"Authorization": f"Bearer {API_KEY}"}) as http:
        max_model_len = http.get("/v1/models").json()["data"][0]["max_model_len"]
    probe_latencies(base, 2, args.max_tokens)   # warm-up
    unloaded, failures = probe_latencies(base, args.probes, args.max_tokens)
    unloaded_p99 = percentile(unloaded, 0.99)
    print(f"probe: one chat request at a time (max_tokens={args.max_tokens}), a new connection each; "
          f"max_model_len {max_model_len}")
    print(f"{'unloaded':<12} probes {len(unloaded)}/{args.probes}  p50 {percentile(unloaded, 0.5):6.3f}s  "
          f"p99 {unloaded_p99:6.3f}s  (mean {statistics.mean(unloaded):.3f}s)")
    ok = failures == 0
    floods = {"tokenizer": lambda stop: tokenizer_flood(base, stop),
              "connections": lambda stop: connection_flood(host, port, stop),
              "long-prompt": lambda stop: long_prompt_flood(base, stop, max_model_len)}
    for name in args.floods:
        stop = threading.Event()
        ok = run_flood(floods[name](stop), stop, base, args, unloaded_p99) and ok
    again, _ = probe_latencies(base, args.probes, args.max_tokens)
    print(f"{'unloaded':<12} probes {len(again)}/{args.probes}  p50 {percentile(again, 0.5):6.3f}s  "
          f"p99 {percentile(again, 0.99):6.3f}s  (again, after the floods: the machine's own noise)")
    if not ok:
        print("FAILED: a probe was not answered", file=sys.stderr)
    return 0 if ok else 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--probes", type=int, default=30)
    parser.add_argument("--max-tokens", type=int, default=4)
    parser.add_argument("--threads", type=int, default=1, help="torch threads of the server")
    parser.add_argument("--settle", type=float, default=3.0, help="seconds a flood runs before the probes")
    parser.add_argument("--floods", nargs="+", default=["tokenizer", "connections", "long-prompt"],
                        choices=["tokenizer", "connections", "long-prompt"])
    parser.add_argument("--serve-option", action="append", default=[], metavar="OPTION",
                        help="passed to rubric serve, e.g. --serve-option=--max-num-batched-tokens=128")
    parser.add_argument("--model", default="smollm2-135m-instruct",
                        help="model for rubric serve: a catalog name or a path (default: smollm2-135m-instruct)")
    args = parser.parse_args()
    from judge_engine.server.background import ServerProcess, free_port

    port = free_port()
    command = [sys.executable, "-m", "rubrics.cli.main", "serve", "--host", "127.0.0.1", "--port", str(port),
               "--served-model-name", SERVED, "--threads", str(args.threads), "--api-key", API_KEY]
    command += ["--model", args.model, *args.serve_option]
    with tempfile.TemporaryDirectory() as folder, ServerProcess(command, port, f"{folder}/serve.log") as server:
        return measure(server.url, "127.0.0.1", port, args)


if __name__ == "__main__":
    sys.exit(main())
