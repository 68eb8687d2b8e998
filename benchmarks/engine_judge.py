"""Judging workload through LLM.score versus a transformers baseline, measured in the same run.

24 trajectories x 6 criteria, built by the embedded judge's own prompt builder (rubrics/judges/prompt/ids.py: the
grading instructions, then the task and the trajectory as fenced evidence, then the rubric item and the answer cue):
each prompt is ~710 token ids, of which ~650 (instructions, task, trajectory) are shared by the 6 criteria of a
trajectory and ~60 (the item) are its own; the instructions and the task line (~240) are shared by all trajectories.
Each prompt is scored on the judge's answers "Yes" / "No". (Until 2026-11-29 the workload used a 60-token stand-in
for the instructions, so ~100 tokens were shared by all trajectories: the engine computes more per judgment there,
and the same engine measured 4.25x on it against 5.1-5.3x on these prompts.)

    python benchmarks/engine_judge.py [--dtype auto|bfloat16] [--quick] [--threads N] [--device cpu|cuda] [--model PATH]
                                      [--quantization int8] [--rss] [--rss-only] [--llama-cpp-rounds N]

Prints: judgments/s for the engine and for the baseline (one transformers forward per prompt, same model and
dtype, on a sample of the prompts) in alternating rounds, and their ratio (the median of the rounds' ratios);
computed_prompt_tokens / prompt_tokens; peak KV blocks versus a contiguous max-length reservation; KV slots
allocated but unused at the peak; achieved FLOP/s on computed tokens (2 * params * tokens + attention) as a
fraction of this machine's float32 GEMM peak (and of the run dtype's, when it is another), measured here with a
big matmul; the CPU it ran on (model and vector/matrix flags) and why the engine chose its dtype; the time of a
second LLM() start-up (weights already converted and cached); and, where llama-cpp-python is installed and the
model is a .gguf, llama.cpp on the same prompts (its own prefix reuse between consecutive prompts, same threads).
Targets: ratio >= 5x, computed fraction <= 0.25, unused slots at peak < 4%.

With --quantization int8 an int8 engine (judge_engine/loading/quantization.py) joins the rounds (float engine, int8 engine,
baseline, each round): its judgments/s, int8 / float and int8 / baseline (medians of the rounds' ratios), and the
accuracy cost, max and mean |log-prob int8 - float| over every prompt and choice (target: int8 >= 10 judgments/s
with the embedded model on 2 cores, >= 1.8x float32). --rss adds, for each engine, the workload in a fresh process
(after one process that fills the caches): judgments/s (best of --rss-passes, default 2) and the process's peak
RSS; --rss-only runs just that (for models too big to hold a float engine, an int8 one and transformers in one
process).

--llama-cpp-rounds N: only the engine as a user runs it (--dtype, --quantization) against llama.cpp
(llama-cpp-python, installed for the benchmark only, never by the project; build it with native flags) on the same
.gguf and threads, N rounds that alternate the two from a cold prefix cache each; prints the CPU model and flags,
each round's judgments/s and load average, and the median ratio (target: engine >= 1.5x llama.cpp).

Engine and baseline run in the same process under the same settings: torch threads (default: the cores this
process may use) and OMP_WAIT_POLICY=PASSIVE unless already set. On a shared machine OpenMP's default busy
waiting makes every parallel op wait for a core that another process holds (measured on 2 busy cores: 6x
slower with 2 threads); PASSIVE lets idle threads sleep. It must be set before torch loads OpenMP.
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import argparse  # noqa: E402
import random  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import torch  # noqa: E402

WORDS = ("invoice expense ledger approval travel quarter spend report department variance receipt budget "
         "email attachment summary forecast audit policy vendor hotel flight meal region manager signoff "
         "total figure sheet drive slack message revenue margin cost reconcile").split()
CRITERIA = [
    "The report flags the two expenses that were approved without a manager sign-off, and names for each of them "
    "the approver who was missing and the amount that was paid.",
    "The department breakdown in the report matches the figures in the Drive sheet exactly, including the totals "
    "of the travel, hotel and meal categories for every region.",
    "The summary compares the quarter with Q2 and explains the biggest change in spend with a reason that the data "
    "in the ledger supports, not a guess.",
    "The report fits on one page, and a CFO can read it without opening the raw data, the Drive sheet or the Slack "
    "thread, or asking the agent a follow-up question.",
    "Every number in the report can be traced back to a row of the source data, and none of the totals was "
    "estimated, rounded or copied from an earlier report.",
    "The email with the report was sent only to the CFO, from the finance mailbox, with the sheet attached, and "
    "nobody else was copied on it.",
]
TASK = "Prepare the Q3 travel-expense MIS for the CFO and email it to her."


def trajectory_text(index: int, tokenizer, target_tokens: int) -> str:
    """Tool-call lines up to about `target_tokens` tokens (the last line is cut at a word to land close)."""
    rng = random.Random(index)
    lines, text = [], ""
    step = 0
    while len(tokenizer.encode(text, add_special_tokens=False)) < target_tokens:
        step += 1
        words = " ".join(rng.choice(WORDS) for _ in range(12))
        lines.append(f"[step {step}] tool=read_file result: {words} amount {rng.randint(100, 99999)}.")
        text = "\n".join(lines)
    while len(tokenizer.encode(text, add_special_tokens=False)) > target_tokens and " " in lines[-1]:
        lines[-1] = lines[-1].rsplit(" ", 1)[0]
        text = "\n".join(lines)
    return text


def build_prompts(tokenizer, trajectories: int, criteria: int, shared_tokens: int
                  ) -> tuple[list[list[int]], list[list[int]]]:
    """`trajectories` x `criteria` judge prompts as token ids, the way the embedded judge builds them; the prompts
    of a trajectory share about `shared_tokens` tokens. Returns (prompts, answer choices as token ids)."""
    from rubrics.judges.methods import ChoiceMethod
    from rubrics.judges.prompt.ids import PromptBuilder
    from rubrics.judges.prompt.judge_prompt import JudgePrompt
    from rubrics.judges.protocol import EvidenceBlock, JudgeContext, JudgeItem, JudgeRequest

    builder = PromptBuilder(tokenizer, max_model_len=1 << 20)
    method = ChoiceMethod()

    def built(t: int, body: str, count: int) -> list[JudgePrompt]:
        context = JudgeContext(f"t{t}", TASK, None, (EvidenceBlock("trajectory", body),))
        items = [JudgeItem(id=f"c{c}", kind="criterion", points=2, criterion=CRITERIA[c % len(CRITERIA)])
                 for c in range(count)]
        prompts = [JudgePrompt(JudgeRequest(context, item), method.prompts(item), method) for item in items]
        builder.build(prompts)
        return prompts

    empty = built(0, "", 1)[0]
    frame = len(empty.prefixes[0])  # the shared part around an empty trajectory
    prompts = []
    for t in range(trajectories):
        for prompt in built(t, trajectory_text(t, tokenizer, shared_tokens - frame), criteria):
            prompts += [prompt.ids(index) for index in range(len(prompt.specs))]
    return prompts, empty.choices[0]


def default_threads() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def synchronize(device: str) -> None:
    """Wait for queued GPU work, so that a timer reads the work's end, not its launch."""
    if device.startswith("cuda"):
        torch.cuda.synchronize(device)


def fresh_process_startup(model: str | None, dtype: str, threads: int, device: str) -> tuple[float, float]:
    """(seconds from `import judge_engine` to a ready LLM, whole process wall time) in a new interpreter."""
    code = ("import time; t = time.perf_counter(); import torch; torch.set_num_threads(%d); "
            "from judge_engine import LLM; LLM(%r, dtype=%r, device=%r); print(time.perf_counter() - t)"
            % (threads, model, dtype, device))
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return float(done.stdout.strip().splitlines()[-1]), time.perf_counter() - start


def gemm_peak_flops(dtype: torch.dtype, device: str, size: int = 2048, repeats: int = 8) -> float:
    a = torch.randn(size, size, dtype=dtype, device=device)
    b = torch.randn(size, size, dtype=dtype, device=device)
    torch.mm(a, b)
    best = float("inf")
    for _ in range(repeats):
        synchronize(device)
        start = time.perf_counter()
        torch.mm(a, b)
        synchronize(device)
        best = min(best, time.perf_counter() - start)
    return 2 * size ** 3 / best


def cpu_line() -> str:
    """The CPU model and the flags that decide matrix-product speed."""
    from judge_engine.loading.cpu_info import host_cpu

    return host_cpu().describe()


class LlamaCpp:
    """llama.cpp (llama-cpp-python) over a .gguf, judging prompts one after another as a user would drive it:
    consecutive prompts keep their common prefix in llama.cpp's cache (its own prefix reuse), as the engine's prefix
    cache does; the log-probabilities of the choices' first tokens come from the last position."""

    def __init__(self, gguf: Path, threads: int, max_len: int):
        import llama_cpp

        self.version, self.name = llama_cpp.__version__, gguf.name
        self.model = llama_cpp.Llama(model_path=str(gguf), n_ctx=max_len, n_threads=threads,
                                     n_threads_batch=threads, n_batch=512, logits_all=False, verbose=False)

    @staticmethod
    def unavailable(gguf: Path) -> str | None:
        """Why llama.cpp cannot run on ``gguf`` here, or None."""
        try:
            import llama_cpp  # noqa: F401
        except ImportError:
            return "llama-cpp-python is not installed (pip install llama-cpp-python to compare)"
        return None if gguf.suffix == ".gguf" else f"{gguf} is not a .gguf file"

    def judge(self, prompts: list[list[int]], choices: list[list[int]]) -> tuple[float, list[list[float]]]:
        """Seconds and scores of every prompt, from a cold prefix (the first prompt is computed whole)."""
        import numpy as np

        previous: list[int] = []
        scores = []
        start = time.perf_counter()
        for prompt in prompts:
            common = shared_prefix_len(previous, prompt[:-1])  # the last token is always evaluated: its logits
            self.model.n_tokens = common  # eval() drops the cache after n_tokens and evaluates the rest
            self.model.eval(prompt[common:])
            # without logits_all, llama-cpp-python keeps no scores (0.3.x); the context holds the last token's logits
            logits = torch.from_numpy(np.ctypeslib.as_array(self.model._ctx.get_logits(),
                                                            shape=(self.model.n_vocab(),)).copy())
            scores.append(torch.log_softmax(logits, -1)[[ids[0] for ids in choices]].tolist())
            previous = prompt
        return time.perf_counter() - start, scores

    def note(self) -> str:
        return f"llama-cpp-python {self.version}, {self.name}"


def llama_cpp_rate(gguf: Path, prompts: list[list[int]], choices: list[list[int]], threads: int,
                   max_len: int) -> tuple[float | None, str, list[list[float]]]:
    """llama.cpp on the same prompts, once: judgments/s, a note and the scores, or None and why it did not run."""
    reason = LlamaCpp.unavailable(gguf)
    if reason is not None:
        return None, reason, []
    llama = LlamaCpp(gguf, threads, max_len)
    seconds, scores = llama.judge(prompts, choices)
    return len(prompts) / seconds, llama.note(), scores


def print_llama_cpp_rounds(args, trajectories: int, criteria: int) -> None:
    """The engine as a user runs it (--dtype, --quantization) against llama.cpp on the same .gguf and threads, in
    rounds that alternate the two (each from a cold prefix cache), so that the machine's drift touches both alike;
    the ratio is the median of the rounds' ratios. Nothing else is loaded (no float engine, no transformers)."""
    from judge_engine import LLM

    llm = LLM(args.model, dtype=args.dtype, quantization=args.quantization)
    gguf = Path(llm.model_path)
    reason = LlamaCpp.unavailable(gguf)
    if reason is not None:
        raise SystemExit(f"--llama-cpp-rounds: {reason}")
    prompts, choices = build_prompts(llm.tokenizer, trajectories, criteria, shared_tokens=650)
    llm.score(["warm-up prompt"], choices)
    llama = LlamaCpp(gguf, args.threads, llm.engine.max_model_len)
    llama.judge(prompts[:1], choices)  # warm-up
    numerics = args.quantization or llm.engine.config.dtype
    lengths = [len(ids) for ids in prompts]
    print(f"cpu: {cpu_line()}; {len(prompts)} judgments of {min(lengths)}-{max(lengths)} prompt tokens, "
          f"{args.threads} threads, engine {numerics}, {llama.note()}")
    ratios = []
    for index in range(1, args.llama_cpp_rounds + 1):
        engine_s, engine_scores, _ = engine_pass(llm, prompts, choices, "cpu")
        llama_s, llama_scores = llama.judge(prompts, choices)
        ratios.append(llama_s / engine_s)
        print(f"round {index}: engine {len(prompts) / engine_s:6.2f} judgments/s, llama.cpp "
              f"{len(prompts) / llama_s:6.2f} judgments/s, engine / llama.cpp {ratios[-1]:5.2f}x (load average "
              f"{os.getloadavg()[0]:.1f})", flush=True)
    gap = max(abs(a - b) for row_e, row_l in zip(engine_scores, llama_scores) for a, b in zip(row_e, row_l))
    print(f"engine ({numerics}) / llama.cpp: {statistics.median(ratios):.2f}x, median of {len(ratios)} rounds "
          f"(target >= 1.5x); max |log-prob engine - llama.cpp| {gap:.3f}")


def model_flops(llm, stats: dict) -> float:
    """2 FLOPs per weight of the layers' linear maps per computed token, 2 per LM-head weight per logits row, and the
    attention's products; counted from the model's shape, not its tensors (held as int8 or GGUF blocks, they are no
    parameters: counting parameters gave negative figures)."""
    spec = llm.engine.spec
    flops = 2 * spec.num_layers * spec.layer_weights() * stats["batched_tokens"]
    flops += 2 * spec.vocab_size * spec.hidden_size * stats["logits_rows"]
    flops += 4 * spec.num_layers * spec.num_heads * spec.head_dim * stats["attention_pairs"]
    return flops


def load_baseline(folder, dtype, device: str):
    import transformers

    return transformers.AutoModelForCausalLM.from_pretrained(folder, dtype=dtype).to(device).eval()


def baseline_rate(model, device: str, prompts: list[list[int]], choices: list[list[int]], last_logits_only: bool
                  ) -> tuple[float, list[list[float]]]:
    """One transformers forward per prompt: judgments/s and the scores. With last_logits_only the LM head runs on
    the last position only (logits_to_keep=1), else on every position (a plain `model(ids)` call). On a shared
    machine another process can slow a few forwards down, so the rate is the better of prompts / total time and
    1 / median time per prompt: never worse for the baseline."""
    if any(len(ids) != 1 for ids in choices):
        raise SystemExit("the baseline needs single-token choices")
    keep = {"logits_to_keep": 1} if last_logits_only else {}
    scores = []
    with torch.inference_mode():
        model(torch.tensor([prompts[0]], device=device), **keep)  # warm-up
        times = []
        for prompt in prompts:
            synchronize(device)
            start = time.perf_counter()
            logits = model(torch.tensor([prompt], device=device), **keep).logits[0, -1]
            logprobs = torch.log_softmax(logits.float(), -1)
            scores.append([float(logprobs[ids[0]]) for ids in choices])  # float() waits for the GPU
            synchronize(device)
            times.append(time.perf_counter() - start)
    median = sorted(times)[len(times) // 2]
    return max(len(prompts) / sum(times), 1 / median), scores


def engine_pass(llm, prompts, choices, device: str) -> tuple[float, list, dict]:
    """All prompts through LLM.score from a cold prefix cache: seconds, scores, and the stats of this pass."""
    llm.engine.block_manager.reset_prefix_cache()
    before = llm.stats()
    synchronize(device)
    start = time.perf_counter()
    scores = llm.score(prompts, choices)
    synchronize(device)
    seconds = time.perf_counter() - start
    after = llm.stats()
    stats = {k: v - before[k] if isinstance(v, (int, float)) and k in before else v for k, v in after.items()}
    for key in ("kv_blocks_peak", "kv_slots_unused_at_peak", "kv_seqs_at_peak"):
        stats[key] = after[key]
    return seconds, scores, stats


def shared_prefix_len(a: list[int], b: list[int]) -> int:
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return n


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dtype", default="float32", choices=["float32", "bfloat16", "auto"],
                        help="auto: the engine's own choice for this hardware (default: float32)")
    parser.add_argument("--quick", action="store_true", help="6 trajectories x 6 criteria, smaller baseline sample")
    parser.add_argument("--threads", type=int, default=default_threads(),
                        help="torch threads for engine and baseline (default: the cores this process may use)")
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    parser.add_argument("--model", default=None, help="HF folder or .gguf (default: the embedded model)")
    parser.add_argument("--block-size", type=int, default=None, help="KV block size (default: the engine's)")
    parser.add_argument("--rounds", type=int, default=5, help="engine/baseline rounds (the ratio is their median)")
    parser.add_argument("--baseline-sample", type=int, default=None, help="prompts timed for the baseline")
    parser.add_argument("--quantization", choices=["int8", "int8-weights"], default=None,
                        help="also run an int8 engine in every round, against the float one and the baseline")
    parser.add_argument("--rss", action="store_true",
                        help="also measure each engine alone in a fresh process: judgments/s and peak RSS")
    parser.add_argument("--rss-only", action="store_true", help="only the fresh-process measurements of --rss")
    parser.add_argument("--rss-passes", type=int, default=2, help="workload passes in each fresh process")
    parser.add_argument("--save-scores", metavar="PATH", help="write the fresh processes' scores to this JSON file")
    parser.add_argument("--llama-cpp-rounds", type=int, metavar="N", default=0,
                        help="only the engine (as --dtype and --quantization ask) against llama.cpp on the same "
                             ".gguf, N alternating rounds (llama-cpp-python installed for the benchmark only)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    if args.llama_cpp_rounds:
        print_llama_cpp_rounds(args, 6 if args.quick else 24, 6)
        return
    if args.rss_only:
        print_fresh_process_workloads(args, 6 if args.quick else 24, 6)
        return

    from judge_engine import LLM
    from judge_engine.loading.loader import model_folder

    trajectories = 6 if args.quick else 24
    criteria = 6

    device = args.device
    if device == "cuda" and not torch.cuda.is_available():
        raise SystemExit("--device cuda: no CUDA device is available")
    options = {"block_size": args.block_size} if args.block_size else {}
    LLM(args.model, dtype=args.dtype, device=device)  # first start-up: may fetch and convert the weights once
    start = time.perf_counter()
    llm = LLM(args.model, dtype=args.dtype, device=device, **options)
    synchronize(device)
    startup_s = time.perf_counter() - start
    dtype = llm.engine.config.torch_dtype  # "auto" resolved: the baseline and the peak use the engine's dtype

    fresh_ready_s, fresh_process_s = fresh_process_startup(args.model, args.dtype, args.threads, device)
    prompts, choices = build_prompts(llm.tokenizer, trajectories, criteria, shared_tokens=650)
    lengths = [len(ids) for ids in prompts]
    llm.score(["warm-up prompt"], choices)
    quantized = None
    if args.quantization:
        LLM(args.model, device=device, quantization=args.quantization)  # first start-up: quantizes once, into the cache
        start = time.perf_counter()
        quantized = LLM(args.model, device=device, quantization=args.quantization, **options)
        quantized_startup_s = time.perf_counter() - start
        quantized.score(["warm-up prompt"], choices)
    sample = args.baseline_sample or (6 if args.quick else 12)
    baseline = load_baseline(model_folder(llm.model_path), dtype, device)
    # The machine's speed drifts (other tenants): rounds alternate the engine and the baseline, and the ratio is
    # the median of each round's ratio, so that both sides of a ratio ran at about the same time.
    rounds = []
    quantized_rates = []
    for _ in range(args.rounds):
        engine_s, engine_scores, stats = engine_pass(llm, prompts, choices, device)
        if quantized is not None:
            quantized_s, quantized_scores, _ = engine_pass(quantized, prompts, choices, device)
            quantized_rates.append(len(prompts) / quantized_s)
        base_rate, base_scores = baseline_rate(baseline, device, prompts[:sample], choices, True)
        rounds.append((len(prompts) / engine_s, base_rate))
    plain_rate, _ = baseline_rate(baseline, device, prompts[:max(sample // 2, 1)], choices, False)
    ratio = statistics.median(engine_rate / base_rate for engine_rate, base_rate in rounds)
    engine_rate, base_rate = rounds[-1]
    shared = min(shared_prefix_len(prompts[t * criteria], prompts[t * criteria + c])
                 for t in range(trajectories) for c in range(1, criteria))
    across = shared_prefix_len(prompts[0], prompts[criteria])  # the judge's instructions and the task line
    agreement = max(abs(a - b) for row_e, row_b in zip(engine_scores, base_scores) for a, b in zip(row_e, row_b))

    llama_rate, llama_note, llama_scores = llama_cpp_rate(Path(llm.model_path), prompts, choices, args.threads,
                                            llm.engine.max_model_len)
    peak = gemm_peak_flops(dtype, device)
    peak_float32 = peak if dtype == torch.float32 else gemm_peak_flops(torch.float32, device)
    flops = model_flops(llm, stats)
    block_size = llm.engine.config.block_size
    paged_slots = stats["kv_blocks_peak"] * block_size
    contiguous_model = stats["kv_seqs_at_peak"] * llm.engine.max_model_len
    contiguous_workload = stats["kv_seqs_at_peak"] * max(lengths)
    unused = stats["kv_slots_unused_at_peak"] / paged_slots if paged_slots else 0.0
    computed_fraction = stats["computed_prompt_tokens"] / stats["prompt_tokens"]

    print(f"workload: {trajectories} trajectories x {criteria} criteria = {len(prompts)} judgments, "
          f"prompt tokens {min(lengths)}-{max(lengths)} (mean {sum(lengths) / len(lengths):.0f}); "
          f">= {shared} shared by a trajectory's criteria (so {min(lengths) - shared}-{max(lengths) - shared} "
          f"unique per criterion), {across} (instructions and task) shared by all trajectories; "
          f"choices {[llm.tokenizer.decode(ids) for ids in choices]}, dtype {llm.engine.config.dtype}, device {device}, "
          f"threads {args.threads}, "
          f"OMP_WAIT_POLICY={os.environ.get('OMP_WAIT_POLICY')}")
    print(f"cpu: {cpu_line()}; engine dtype {llm.engine.config.dtype} ({llm.engine.config.dtype_reason})")
    print(f"start-up with the weights already converted: second LLM() in this process {startup_s:.2f} s; "
          f"new process {fresh_ready_s:.2f} s from import to ready ({fresh_process_s:.2f} s whole process)")
    for index, (round_engine, round_base) in enumerate(rounds, 1):
        print(f"round {index}: engine {round_engine:6.2f} judgments/s, baseline {round_base:5.2f} judgments/s, "
              f"ratio {round_engine / round_base:5.2f}x")
    print(f"engine:   {engine_rate:8.2f} judgments/s (last round: {engine_s:.1f} s, {stats['steps']} steps)")
    print(f"baseline: {base_rate:8.2f} judgments/s (last round; transformers, one forward per prompt with "
          f"logits_to_keep=1, {sample} prompts timed); plain model(ids) forward after it: {plain_rate:.2f} judgments/s")
    print(f"ratio:    {ratio:8.2f}x  median of {len(rounds)} rounds (target >= 5x; last engine round against the "
          f"plain forward: {engine_rate / plain_rate:.2f}x); max |log-prob engine - baseline| {agreement:.2e}")
    print(f"computed_prompt_tokens / prompt_tokens: {stats['computed_prompt_tokens']} / {stats['prompt_tokens']}"
          f" = {computed_fraction:.3f} (target <= 0.25); prefix cache hits {stats['cached_prompt_tokens']} tokens "
          f"({stats['cached_prompt_tokens'] / stats['prompt_tokens']:.3f} of the prompt tokens)")
    print(f"KV at peak: {stats['kv_blocks_peak']} blocks x {block_size} = {paged_slots} slots for "
          f"{stats['kv_seqs_at_peak']} live sequences; a contiguous reservation would need "
          f"{contiguous_model} slots at max_model_len {llm.engine.max_model_len} "
          f"({contiguous_model / max(paged_slots, 1):.0f}x), {contiguous_workload} at the longest prompt "
          f"({contiguous_workload / max(paged_slots, 1):.1f}x)")
    print(f"KV slots allocated but unused at peak: {stats['kv_slots_unused_at_peak']} / {paged_slots} = "
          f"{100 * unused:.2f}% (target < 4%)")
    print(f"FLOPs on computed tokens: {flops / 1e9:.1f} GFLOP over {stats['batched_tokens']} tokens; "
          f"achieved {flops / engine_s / 1e9:.1f} GFLOP/s end-to-end, {flops / stats['model_time_s'] / 1e9:.1f} "
          f"GFLOP/s inside the model; float32 GEMM peak measured {peak_float32 / 1e9:.1f} GFLOP/s -> "
          f"{flops / engine_s / peak_float32:.2f} of the float32 peak end-to-end "
          f"({flops / stats['model_time_s'] / peak_float32:.2f} in model)")
    if dtype != torch.float32:
        print(f"{llm.engine.config.dtype} GEMM peak measured {peak / 1e9:.1f} GFLOP/s -> {flops / engine_s / peak:.2f} "
              f"of it end-to-end")
    if quantized is not None:
        print_quantized(args, rounds, quantized_rates, engine_scores, quantized_scores, base_scores,
                        quantized_startup_s)
    if args.rss:
        print_fresh_process_workloads(args, trajectories, criteria)
    if llama_rate is None:
        print(f"llama.cpp: skipped ({llama_note})")
    else:
        llama_gap = max(abs(a - b) for row_e, row_l in zip(engine_scores, llama_scores) for a, b in zip(row_e, row_l))
        print(f"llama.cpp: {llama_rate:8.2f} judgments/s ({llama_note}; {args.threads} threads); engine (last round) "
              f"/ llama.cpp: {engine_rate / llama_rate:.2f}x; max |log-prob engine - llama.cpp| {llama_gap:.2e} "
              f"(llama.cpp multiplies the quantized weights as they are)")


def print_quantized(args, rounds, quantized_rates, engine_scores, quantized_scores, base_scores,
                    startup_s: float) -> None:
    q = args.quantization
    for index, ((engine_rate, base_rate), rate) in enumerate(zip(rounds, quantized_rates), 1):
        print(f"round {index}: {q} {rate:6.2f} judgments/s, {q} / {args.dtype} {rate / engine_rate:5.2f}x, "
              f"{q} / baseline {rate / base_rate:5.2f}x")
    over_float = statistics.median(rate / engine_rate for (engine_rate, _), rate in zip(rounds, quantized_rates))
    over_base = statistics.median(rate / base_rate for (_, base_rate), rate in zip(rounds, quantized_rates))
    gaps = [abs(a - b) for row_f, row_q in zip(engine_scores, quantized_scores) for a, b in zip(row_f, row_q)]
    to_base = max(abs(a - b) for row_q, row_b in zip(quantized_scores, base_scores) for a, b in zip(row_q, row_b))
    print(f"{q}:     {quantized_rates[-1]:8.2f} judgments/s (last round; target >= 10 with the embedded model on 2 "
          f"cores); {q} / {args.dtype} {over_float:.2f}x (target >= 1.8x), {q} / baseline {over_base:.2f}x (medians "
          f"of {len(rounds)} rounds); second LLM() start-up {startup_s:.2f} s (weights read from the int8 cache)")
    print(f"{q} accuracy: |log-prob {q} - {args.dtype}| max {max(gaps):.3f}, mean {statistics.mean(gaps):.3f} over "
          f"{len(gaps)} prompt-choice pairs; max |log-prob {q} - baseline| {to_base:.3f}")


def print_fresh_process_workloads(args, trajectories: int, criteria: int) -> None:
    """Each engine alone in a fresh process: judgments/s and peak RSS, and the int8 accuracy cost."""
    configs = [(args.dtype, None)] + ([("float32", args.quantization)] if args.quantization else [])
    results = {}
    for dtype, quantization in configs:
        fresh_process_workload(args, dtype, quantization, trajectories, criteria, passes=0)  # fills the caches
        results[quantization or dtype] = fresh_process_workload(args, dtype, quantization, trajectories, criteria,
                                                                passes=args.rss_passes)
    if args.save_scores:
        import json

        Path(args.save_scores).write_text(json.dumps({name: result["scores"] for name, result in results.items()}))
    for name, result in results.items():
        print(f"fresh process, {name}: {result['rate']:.2f} judgments/s (best of {args.rss_passes} passes, "
              f"{args.threads} threads), "
              f"peak RSS {result['rss_kb'] / 1024 ** 2:.2f} GiB")
    if args.quantization:
        float_scores, int8_scores = results[args.dtype]["scores"], results[args.quantization]["scores"]
        gaps = [abs(a - b) for row_f, row_q in zip(float_scores, int8_scores) for a, b in zip(row_f, row_q)]
        rate = results[args.quantization]["rate"] / results[args.dtype]["rate"]
        print(f"fresh process, {args.quantization} / {args.dtype}: {rate:.2f}x; |log-prob difference| max "
              f"{max(gaps):.3f}, mean {statistics.mean(gaps):.3f}")


def fresh_process_workload(args, dtype: str, quantization: str | None, trajectories: int, criteria: int,
                           passes: int) -> dict:
    """The workload in a new interpreter: judgments/s (best of ``passes``), peak RSS and the scores; passes=0 only
    starts the engine (converting and quantizing into the caches if needed)."""
    code = f"""
import json, resource, sys
sys.path.insert(0, {str(Path(__file__).resolve().parent)!r})
import torch
torch.set_num_threads({args.threads})
from engine_judge import build_prompts, engine_pass
from judge_engine import LLM
llm = LLM({args.model!r}, dtype={dtype!r}, quantization={quantization!r})
if {passes} == 0:
    print(json.dumps({{}}))
    sys.exit(0)
prompts, choices = build_prompts(llm.tokenizer, {trajectories}, {criteria}, shared_tokens=650)
llm.score(["warm-up prompt"], choices)
best = None
for _ in range({passes}):
    seconds, scores, _ = engine_pass(llm, prompts, choices, "cpu")
    best = seconds if best is None else min(best, seconds)
print(json.dumps({{"rate": len(prompts) / best, "rss_kb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
                  "scores": scores}}))
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    import json

    return json.loads(done.stdout.strip().splitlines()[-1])


if __name__ == "__main__":
    main()
