"""Decode throughput: 32 concurrent sequences through the engine versus transformers generate on one sequence.

    python benchmarks/engine_generate.py [--dtype bfloat16] [--quick] [--threads N] [--device cpu|cuda] [--model PATH]
                                         [--quantization int8] [--rounds N]

Prints output tokens/s for both (target: engine >= 5x the baseline), the engine's steady decode rate, and the
engine's time to first token and time per output token (mean and p90 over the requests).
With --quantization int8 an int8 engine (judge_engine/loading/quantization.py) runs too, in rounds alternating with the
float one (both in this process, the same prompts): its tokens/s, the ratio int8 / float (median of the rounds'
ratios) and how many of the greedy tokens the two engines agree on (int8 logits differ slightly, so a greedy
continuation may branch off).
Engine and baseline run in the same process under the same settings (threads, and OMP_WAIT_POLICY=PASSIVE
unless already set: see engine_judge.py).
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import argparse  # noqa: E402
import statistics  # noqa: E402
import time  # noqa: E402

import torch  # noqa: E402

TOPICS = ["expense reports", "travel policy", "quarterly budgets", "vendor audits", "hotel receipts",
          "flight bookings", "meal allowances", "approval chains"]


def prompts_for(tokenizer, count: int) -> list[str]:
    prompts = []
    for i in range(count):
        messages = [{"role": "user", "content": f"Write a short note {i} for a CFO about {TOPICS[i % len(TOPICS)]}, "
                                                f"listing three risks and one recommendation."}]
        prompts.append(tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True))
    return prompts


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def default_threads() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def synchronize(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize(device)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dtype", default="float32", choices=["float32", "bfloat16"])
    parser.add_argument("--quick", action="store_true", help="32 new tokens instead of 128")
    parser.add_argument("--threads", type=int, default=default_threads(),
                        help="torch threads for engine and baseline (default: the cores this process may use)")
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    parser.add_argument("--model", default=None)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--quantization", choices=["int8", "int8-weights"], default=None,
                        help="also run an int8 engine, in rounds alternating with the float one")
    parser.add_argument("--rounds", type=int, default=3, help="float / int8 rounds with --quantization")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)

    import transformers

    from judge_engine import LLM, SamplingParams
    from judge_engine.loading.loader import model_folder

    new_tokens = 32 if args.quick else 128
    device = args.device
    if device == "cuda" and not torch.cuda.is_available():
        raise SystemExit("--device cuda: no CUDA device is available")
    llm = LLM(args.model, dtype=args.dtype, device=device)
    prompts = prompts_for(llm.tokenizer, args.concurrency)
    params = SamplingParams(temperature=0.0, max_tokens=new_tokens, ignore_eos=True)
    llm.generate(prompts[:2], SamplingParams(temperature=0.0, max_tokens=2))  # warm-up
    quantized = None
    if args.quantization:
        quantized = LLM(args.model, device=device, quantization=args.quantization)
        quantized.generate(prompts[:2], SamplingParams(temperature=0.0, max_tokens=2))
    rounds = []
    for _ in range(args.rounds if quantized is not None else 1):
        engine_s, outs, steps, steady = engine_run(llm, prompts, params, device)
        if quantized is not None:
            rounds.append((engine_s, engine_run(quantized, prompts, params, device)))
    generated = sum(len(o.token_ids) for o in outs)
    ttft = [o.metrics.time_to_first_token for o in outs]
    tpot = [o.metrics.time_per_output_token for o in outs]

    dtype = {"float32": torch.float32, "bfloat16": torch.bfloat16}[args.dtype]
    model = transformers.AutoModelForCausalLM.from_pretrained(model_folder(llm.model_path), dtype=dtype)
    model = model.to(device).eval()
    ids = torch.tensor([outs[0].prompt_token_ids], device=device)
    mask = torch.ones_like(ids)
    with torch.inference_mode():
        model.generate(ids, attention_mask=mask, max_new_tokens=2, do_sample=False)
        synchronize(device)
        start = time.perf_counter()
        baseline = model.generate(ids, attention_mask=mask, max_new_tokens=new_tokens, min_new_tokens=new_tokens,
                                  do_sample=False)
        synchronize(device)
        baseline_s = time.perf_counter() - start
    baseline_tokens = baseline.shape[1] - ids.shape[1]
    same_first = baseline[0, ids.shape[1]:].tolist() == outs[0].token_ids

    engine_rate = generated / engine_s
    baseline_rate = baseline_tokens / baseline_s
    print(f"workload: {len(prompts)} concurrent prompts of {len(outs[0].prompt_token_ids)}-"
          f"{max(len(o.prompt_token_ids) for o in outs)} tokens, {new_tokens} new tokens each, dtype {args.dtype}, "
          f"device {device}, threads {args.threads}, OMP_WAIT_POLICY={os.environ.get('OMP_WAIT_POLICY')}")
    print(f"engine:   {engine_rate:8.1f} output tokens/s ({generated} tokens in {engine_s:.1f} s, {steps} steps); "
          f"steady decode {steady:.1f} tokens/s")
    print(f"baseline: {baseline_rate:8.1f} output tokens/s (transformers generate, one sequence, "
          f"{baseline_tokens} tokens in {baseline_s:.1f} s); same greedy tokens as the engine: {same_first}")
    print(f"ratio:    {engine_rate / baseline_rate:8.2f}x (target >= 5x)")
    print(f"time to first token: mean {statistics.mean(ttft):.3f} s, p90 {percentile(ttft, 0.9):.3f} s; "
          f"time per output token: mean {statistics.mean(tpot) * 1000:.1f} ms, "
          f"p90 {percentile(tpot, 0.9) * 1000:.1f} ms")
    if quantized is not None:
        for index, (float_s, (int8_s, _, _, int8_steady)) in enumerate(rounds, 1):
            print(f"round {index}: {args.dtype} {generated / float_s:7.1f} tokens/s, {args.quantization} "
                  f"{generated / int8_s:7.1f} tokens/s (steady {int8_steady:.1f}), ratio {float_s / int8_s:.2f}x")
        ratio = statistics.median(float_s / int8_s for float_s, (int8_s, *_) in rounds)
        int8_outs = rounds[-1][1][1]
        agree = sum(_common_prefix(a.token_ids, b.token_ids) for a, b in zip(outs, int8_outs))
        print(f"{args.quantization}: {generated / rounds[-1][1][0]:8.1f} output tokens/s (last round); "
              f"{args.quantization} / {args.dtype}: {ratio:.2f}x (median of {len(rounds)} rounds); greedy tokens "
              f"before the first difference: {agree} / {generated}")


def engine_run(llm, prompts, params, device: str):
    """One generate over all prompts: (seconds, outputs, steps, steady decode tokens/s)."""
    before = llm.stats()
    synchronize(device)
    start = time.perf_counter()
    outs = llm.generate(prompts, params)
    synchronize(device)
    seconds = time.perf_counter() - start
    steps = llm.stats()["steps"] - before["steps"]
    generated = sum(len(o.token_ids) for o in outs)
    first_token_done = max(o.metrics.first_token_time for o in outs)
    last_done = max(o.metrics.finished_time for o in outs)
    return seconds, outs, steps, (generated - len(outs)) / (last_done - first_token_done)


def _common_prefix(a: list[int], b: list[int]) -> int:
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return n


if __name__ == "__main__":
    main()
