"""int8 linear maps (EngineConfig.quantization="int8"): exact integer products on any x86-64 CPU, batch invariance
by construction, weights int8 in memory, the disk cache of quantized weights, and the options' validation."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import warnings
from pathlib import Path

import pytest
import torch

from engine_fixtures import random_prompt, tiny_gemma2, tiny_llama, tiny_llm, tiny_phi3, tiny_qwen2  # noqa: F401
from judge_engine import SamplingParams
from judge_engine.loading import quantization
from judge_engine.config import EngineConfig, EngineConfigError
from judge_engine.layers import int8_linear as int8
from judge_engine.loading.weight_source import TensorRows
from judge_engine.layers.int8_linear import (Int8Weight, exact_grouped, grouped_matmul, int8_matmul, int8_matmul_method,
                                             quantize_activations)

CHOICES = [" yes", " no"]
FAMILIES = ["tiny_llama", "tiny_qwen2", "tiny_gemma2", "tiny_phi3"]


def exact_product(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return (a.to(torch.int64) @ b.to(torch.int64)).to(torch.int32)


def int8_operands(rows: int, depth: int, cols: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    a = torch.randint(-127, 128, (rows, depth), dtype=torch.int8, generator=generator)
    weight = torch.randint(-127, 128, (cols, depth), dtype=torch.int8, generator=generator)
    a[0] = 127  # worst cases: every term +-127 * 127
    weight[0], weight[1] = 127, -127
    return a, weight.t()  # the engine's layout: an [N, K] weight read transposed


def usable_methods() -> list[str]:
    """The int8 routes this machine can run exactly (float32 everywhere; vnni, int_mm and avx2 where their probes
    pass)."""
    return int8.exact_routes()[0]


def usable_integer_methods() -> list[str]:
    return [method for method in usable_methods() if method in int8.INTEGER_METHODS]


@pytest.mark.parametrize("rows, depth, cols", [(1, 64, 48), (7, 1000, 40), (33, 1025, 96), (300, 2500, 24),
                                               (4, 31, 5), (70, 2080, 7), (2, 4200, 13)])
def test_every_int8_method_gives_the_exact_integer_sums(rows, depth, cols):
    """Each route this machine can run (float32 chunks over the 2^24 bound when K > 1024; torch._int_mm where its
    probe found it exact; the AVX2 kernel with its tiles, column and K tails, and KC blocks) equals int64 sums."""
    a, b = int8_operands(rows, depth, cols, seed=rows + depth)
    if rows > 1:
        a[-1] = -128   # the AVX2 kernel takes |-128| as 128 unsigned: still exact
    exact = exact_product(a, b)
    for method in usable_integer_methods():
        assert torch.equal(int8_matmul(a, b, method), exact), method
    assert int8_matmul_method() in usable_methods()


@pytest.mark.parametrize("rows, depth, cols", [(1, 128, 2), (7, 1536, 40), (33, 576, 96), (200, 1000, 70),
                                               (6, 4, 33), (5, 130, 31), (2, 8960, 17), (400, 256, 100)])
def test_every_route_gives_the_grouped_products_of_exact_sums_to_the_bit(rows, depth, cols):
    """The VNNI kernel (its row tiles and blocks, column panels and masks, a last group shorter than the others,
    terms not a multiple of 4) and the slices of every integer route equal the products of int64 sums to the bit;
    worst cases included: every term +-127 * 127."""
    a, b = int8_operands(rows, depth, cols, seed=rows * depth)
    weight = b.t()
    generator = torch.Generator().manual_seed(depth)
    scales = torch.rand((rows, -(-depth // int8.GROUP)), generator=generator)
    weight_scales = torch.rand((cols, -(-depth // int8.GROUP)), generator=generator)
    exact = exact_grouped(a, scales, weight, weight_scales)
    full = torch.full((rows, depth), 127, dtype=torch.int8)
    threads = torch.get_num_threads()
    try:
        for count in (1, 3):   # the kernels split the columns among the threads
            torch.set_num_threads(count)
            for method in usable_methods():
                assert torch.equal(grouped_matmul(a, scales, weight, weight_scales, method), exact), (method, count)
                assert torch.equal(grouped_matmul(-full, scales, weight, weight_scales, method),
                                   exact_grouped(-full, scales, weight, weight_scales)), (method, count)
    finally:
        torch.set_num_threads(threads)


def test_the_vnni_kernel_is_built_where_the_cpu_has_avx512_vnni_and_else_says_why(monkeypatch, tmp_path):
    from judge_engine.layers import c_kernels, int8_vnni
    from judge_engine.loading.cpu_info import CpuInfo, host_cpu
    if "avx512_vnni" in host_cpu().flags and c_kernels.compiler() is not None:
        assert int8_vnni.kernel().function is not None, int8_vnni.kernel().reason
        assert int8.probe_exact("vnni") == (True, "exact")
    monkeypatch.setattr(c_kernels, "host_cpu", lambda: CpuInfo("an AVX2 CPU", frozenset({"avx", "avx2", "fma"})))
    int8_vnni.kernel.cache_clear()
    try:
        found = int8_vnni.kernel()
        assert found.function is None and "AVX512F" in found.reason and "AVX512_VNNI" in found.reason
        assert int8.probe_exact("vnni") == (False, found.reason)
        with pytest.raises(RuntimeError, match="unavailable"):
            grouped_matmul(torch.zeros(1, 8, dtype=torch.int8), torch.ones(1, 1), torch.zeros(2, 8, dtype=torch.int8),
                           torch.ones(2, 1), "vnni")
    finally:
        int8_vnni.kernel.cache_clear()


def test_the_avx2_kernel_is_built_where_the_cpu_has_avx2_and_a_c_compiler_is_found():
    from judge_engine.layers import c_kernels, int8_avx2
    from judge_engine.loading.cpu_info import host_cpu
    if "avx2" not in host_cpu().flags or c_kernels.compiler() is None:
        pytest.skip("no AVX2 or no C compiler here: the kernel is rightly unavailable")
    assert int8_avx2.kernel().function is not None, int8_avx2.kernel().reason
    assert int8_avx2.grouped_kernel().function is not None, int8_avx2.grouped_kernel().reason
    assert int8.probe_exact("avx2") == (True, "exact")


def test_without_a_c_compiler_the_avx2_kernel_is_unavailable_and_says_why(monkeypatch, tmp_path):
    from judge_engine.layers import c_kernels, int8_avx2
    monkeypatch.setenv("CC", str(tmp_path / "no-such-cc"))
    monkeypatch.setattr(c_kernels.sysconfig, "get_config_var", lambda name: None)
    monkeypatch.setenv("PATH", str(tmp_path))   # no cc either
    monkeypatch.setenv("JUDGE_ENGINE_CACHE", str(tmp_path / "cache"))
    int8_avx2.kernel.cache_clear()
    try:
        found = int8_avx2.kernel()
        assert found.function is None
        assert "compiler" in found.reason or "AVX2" in found.reason or "x86-64" in found.reason
        assert int8.probe_exact("avx2")[0] is False
        with pytest.raises(RuntimeError, match="unavailable"):
            int8_avx2.matmul(torch.zeros(1, 32, dtype=torch.int8), torch.zeros(32, 1, dtype=torch.int8))
    finally:
        int8_avx2.kernel.cache_clear()


def test_a_compiler_that_fails_leaves_the_kernel_unavailable_with_its_message(monkeypatch, tmp_path):
    from judge_engine.layers import c_kernels, int8_avx2
    from judge_engine.loading.cpu_info import host_cpu
    if "avx2" not in host_cpu().flags:
        pytest.skip("no AVX2: the kernel is refused before any compiler runs")
    failing = tmp_path / "failing-cc"
    failing.write_text("#!/bin/sh\necho 'cc: error: broken on purpose' >&2\nexit 3\n")
    failing.chmod(0o755)
    monkeypatch.setenv("CC", str(failing))
    monkeypatch.setenv("JUDGE_ENGINE_CACHE", str(tmp_path / "cache"))
    int8_avx2.kernel.cache_clear()
    try:
        found = int8_avx2.kernel()
        assert found.function is None and "broken on purpose" in found.reason and "exited 3" in found.reason
        assert not list((tmp_path / "cache" / "kernels").glob("*.so"))   # nothing half-built is left to load
    finally:
        int8_avx2.kernel.cache_clear()


NO_VNNI = (False, "this CPU lists no AVX512_VNNI")


@pytest.mark.parametrize("exact, speeds, chosen", [
    ({"vnni": (True, "exact"), "int_mm": (True, "exact"), "avx2": (True, "exact")},
     {"vnni": 430.0, "int_mm": 180.0, "avx2": 90.0, "float32": 40.0}, "vnni"),      # Zen 4: the VNNI kernel
    ({"vnni": (True, "exact"), "int_mm": (True, "exact"), "avx2": (True, "exact")},
     {"vnni": 430.0, "int_mm": 900.0, "avx2": 90.0, "float32": 40.0}, "int_mm"),    # AMX: oneDNN's slices
    ({"vnni": NO_VNNI, "int_mm": (True, "exact"), "avx2": (True, "exact")},
     {"int_mm": 1.9, "avx2": 160.0, "float32": 110.0}, "avx2"),                     # AMD Zen 3: the AVX2 kernel
    ({"vnni": NO_VNNI, "int_mm": (True, "exact"), "avx2": (False, "no C compiler")},
     {"int_mm": 1.9, "float32": 51.0}, "float32"),                                  # Zen 3 without a compiler
    ({"vnni": NO_VNNI, "int_mm": (False, "off by 10^5"), "avx2": (False, "no AVX2")},
     {"int_mm": 130.0, "float32": 40.0}, "float32"),                                # saturating 16-bit sums
])
def test_the_int8_method_is_the_fastest_of_the_exact_ones(monkeypatch, exact, speeds, chosen):
    monkeypatch.delenv(int8.MATMUL_ENV, raising=False)
    monkeypatch.setattr(int8, "probe_exact", exact.__getitem__)
    timed = []
    monkeypatch.setattr(int8, "probe_speeds", lambda methods: timed.append(list(methods)) or speeds)
    int8.int8_products.cache_clear()
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            assert int8_matmul_method() == chosen
        # float32 products of the codes: the user hears why int8 is slow here and what to do
        slow = [w for w in caught if issubclass(w.category, int8.SlowInt8Warning)]
        assert len(slow) == (chosen == "float32")
        assert all("C compiler" in str(w.message) and "quantization=None" in str(w.message) for w in slow)
        assert all(exact[m][0] for m in timed[0] if m != "float32")   # only exact routes are timed
        reason = int8.int8_products().reason   # reported by `rubric model list`
        assert "GFLOP/s" in reason
        assert all(why in reason for usable, why in exact.values() if not usable)
        monkeypatch.setenv(int8.MATMUL_ENV, "int_mm")
        int8.int8_products.cache_clear()
        if exact["int_mm"][0]:
            assert int8_matmul_method() == "int_mm"   # forced: the speeds do not decide
        else:
            with pytest.raises(RuntimeError, match="not usable here"):
                int8_matmul_method()
        monkeypatch.setenv(int8.MATMUL_ENV, "bogus")
        int8.int8_products.cache_clear()
        with pytest.raises(ValueError, match="expected 'auto' or one of"):
            int8_matmul_method()
    finally:
        int8.int8_products.cache_clear()


def test_the_speed_probe_times_each_method_asked():
    speeds = int8.probe_speeds(usable_methods(), rows=8, depth=256, cols=64, repeats=1)
    assert set(speeds) == set(usable_methods()) and all(v > 0 for v in speeds.values())


def test_a_route_four_times_slower_at_its_warm_up_is_not_timed_again(monkeypatch):
    import time as clock
    calls = {"fast": 0, "slow": 0}

    def fake_matmul(a, scales, weight, weight_scales, method):
        calls[method] += 1
        clock.sleep(0.001 if method == "fast" else 0.02)

    monkeypatch.setattr(int8, "grouped_matmul", fake_matmul)
    speeds = int8.probe_speeds(["fast", "slow"], rows=4, depth=32, cols=4, repeats=3)
    assert calls == {"fast": 4, "slow": 1} and speeds["fast"] > speeds["slow"]


@pytest.mark.parametrize("method", int8.METHODS)
def test_int8_scores_are_the_same_bits_whatever_route_is_forced(method, tiny_qwen2, tmp_path, monkeypatch):
    """The probe's choice changes the speed alone: each route this machine can run, forced, gives the chosen
    route's scores to the last bit, alone and in a batch."""
    if method not in usable_methods():
        pytest.skip(f"{method} is not exact here: {int8.probe_exact(method)[1]}")
    target = random_prompt(300, 45)
    others = [random_prompt(400 + i, 5 + (i * 7) % 60) for i in range(20)]
    chosen = tiny_llm(tiny_qwen2, quantization="int8", cache_dir=tmp_path).score(others[:10] + [target], CHOICES)
    monkeypatch.setenv(int8.MATMUL_ENV, method)
    int8.int8_products.cache_clear()
    try:
        assert int8_matmul_method() == method
        llm = tiny_llm(tiny_qwen2, quantization="int8", cache_dir=tmp_path, enable_prefix_caching=False)
        assert llm.score(others[:10] + [target], CHOICES) == chosen
        assert llm.score([target], CHOICES)[0] == chosen[-1]
        assert llm.score(others + [target], CHOICES)[-1] == chosen[-1]
    finally:
        int8.int8_products.cache_clear()


def test_a_group_of_a_row_is_quantized_from_its_own_values_alone():
    group = int8.GROUP
    x = torch.randn(50, 2 * group + group // 4) * torch.linspace(0.1, 30, 50)[:, None]   # a shorter last group
    x[3] = 0.0
    x[5, group:2 * group] = 0.0
    q, scale = quantize_activations(x)
    assert scale.shape == (50, 3)
    alone_q, alone_scale = quantize_activations(x[17:18])
    assert torch.equal(q[17:18], alone_q) and torch.equal(scale[17:18], alone_scale)
    changed = x.clone()
    changed[:, group:] *= 1000.0   # an outlier elsewhere in the row leaves the first group's codes as they were
    assert torch.equal(quantize_activations(changed)[0][:, :group], q[:, :group])
    assert q.dtype == torch.int8 and int(q.abs().max()) == 127
    assert torch.equal(q[3], torch.zeros_like(q[3])) and not scale[3].any()
    assert not q[5, group:2 * group].any() and float(scale[5, 1]) == 0.0 and scale[5, 0] > 0
    per_value = scale.repeat_interleave(group, dim=1)[:, :x.shape[1]]
    assert ((q.float() * per_value - x).abs() <= per_value / 2 + 1e-6).all()
    empty_q, empty_scale = quantize_activations(x[:0])   # a step with no rows for this map
    assert empty_q.shape == (0, x.shape[1]) and empty_scale.shape == (0, 3)


def test_an_int8_product_of_a_row_is_the_same_alone_and_in_any_batch():
    weight = Int8Weight(*int8.quantize_weight(torch.randn(80, 200)))
    bias = torch.randn(80)
    x = torch.randn(300, 201)[:, 1:]  # a strided input, as a slice of a wider buffer gives it
    target = torch.randn(1, 200)
    alone = weight(target, bias)[0]
    for count in (1, 2, 33, 64, 299):
        assert torch.equal(weight(torch.cat([x[:count], target]), bias)[count], alone)
        assert torch.equal(weight(torch.cat([target, x[:count]]), bias)[0], alone)


def test_a_weight_is_quantized_per_group_of_a_channel_or_per_channel():
    group = int8.GROUP
    generator = torch.Generator().manual_seed(11)
    weight = torch.randn(40, 3 * group + 5, generator=generator) * torch.linspace(0.01, 3, 40)[:, None]   # short last
    weight[7, group:2 * group] *= 500.0   # an outlier group leaves the channel's other groups as they were
    q, scale = int8.quantize_weight(weight, rows_at_once=16)
    assert q.dtype == torch.int8 and scale.shape == (40, 4) and int(q.abs().max()) == 127
    assert torch.equal(q[7, :group], int8.quantize_weight(weight[7:8, :group])[0][0])
    per_value = scale.repeat_interleave(group, dim=1)[:, :weight.shape[1]]
    assert ((q.float() * per_value - weight).abs() <= per_value / 2 + 1e-6).all()
    q_channel, scale_channel = int8.quantize_weight(weight, None)
    assert scale_channel.shape == (40, 1) and (q_channel[7, :group] == 0).all()   # coarsened by the outlier
    assert ((q_channel.float() * scale_channel - weight).abs() <= scale_channel / 2 + 1e-6).all()
    with pytest.raises(ValueError, match="scales of shape"):
        Int8Weight(q, scale_channel)   # W8A8 products take a scale per group


@pytest.mark.parametrize("group", [None, int8.GROUP])
@pytest.mark.parametrize("depth", [96, 100])
def test_the_int8_head_multiplies_float_activations_by_the_int8_weight(monkeypatch, group, depth):
    """W8A32: the product of the float rows with the dequantized weight (scales per channel, the LM head's, or per
    group), a row's logits the same bits alone and in any batch. A depth of whole groups is read as a block weight
    of int8 codes, the same bits as float copies of the weight's rows (the route a depth of 100 takes), whatever
    the number of those copies."""
    generator = torch.Generator().manual_seed(3)
    qweight, scale = int8.quantize_weight(torch.randn(300, depth, generator=generator), group)
    x = torch.randn(70, depth, generator=generator)
    head = int8.DequantizedInt8Weight(qweight, scale)
    product = head(x)
    dequantized = qweight.float() * scale.repeat_interleave(int8.GROUP if group else depth, dim=1)[:, :depth]
    torch.testing.assert_close(product, x @ dequantized.t(), atol=1e-4, rtol=1e-4)
    copies = head._dequantized_chunks(x, per_channel=group is None)
    monkeypatch.setattr(int8.DequantizedInt8Weight, "DEQUANTIZED_ROWS", 64)   # five copies, the last one of 44 rows
    assert torch.equal(head._dequantized_chunks(x, per_channel=group is None), copies)
    if group is None:
        copies.mul_(scale[:, 0])
    assert torch.equal(product, copies)
    alone = head(x[17:18])
    for count in (1, 33, 69):
        assert torch.equal(head(torch.cat([x[:count], x[17:18]]))[count], alone[0])


def test_int8_scores_in_their_own_process_with_onednn_capped_at_avx2_are_the_same_bits(tiny_llama, tmp_path):
    """oneDNN's int8 kernels without VNNI saturate 16-bit sums; capped at AVX2 (ONEDNN_MAX_CPU_ISA), the probe must
    notice it and take another exact route (the VNNI kernel, the AVX2 kernel or float32 products, none of them
    oneDNN's): the scores are then the bits of this process's, whatever this CPU has."""
    prompts = [random_prompt(700 + i, 20 + 9 * i) for i in range(3)]
    script = (
        "import json, sys, torch\n"
        "sys.path.insert(0, %r)\n"
        "torch.set_num_threads(1)\n"
        "from engine_fixtures import tiny_llm\n"
        "from judge_engine.layers.int8_linear import int8_matmul_method, probe_exact\n"
        "llm = tiny_llm(%r, quantization='int8', cache_dir=%r)\n"
        "scores = llm.score(json.loads(sys.argv[1]), %r)\n"
        "print(json.dumps({'scores': scores, 'method': int8_matmul_method(), 'probe': probe_exact('int_mm')}))\n"
    ) % (str(Path(__file__).parent), str(tiny_llama), str(tmp_path / "cache"), CHOICES)

    def run(**env) -> dict:
        done = subprocess.run([sys.executable, "-c", script, json.dumps(prompts)], capture_output=True, text=True,
                              env={**os.environ, **env}, check=True, timeout=300)
        return json.loads(done.stdout.strip().splitlines()[-1])

    capped, native = run(ONEDNN_MAX_CPU_ISA="AVX2"), run()
    assert capped["scores"] == native["scores"]
    if not capped["probe"][0]:  # a CPU with VNNI: capped, _int_mm saturates; uncapped it is exact
        assert capped["method"] in ("vnni", "avx2", "float32")
    here = tiny_llm(tiny_llama, quantization="int8", cache_dir=tmp_path / "cache").score(prompts, CHOICES)
    assert here == native["scores"]


def check_invariance(make_llm, target, others) -> None:
    alone = make_llm(enable_prefix_caching=False).score([target], CHOICES)[0]
    batch = others[:50] + [target] + others[50:]
    in_batch = make_llm(enable_prefix_caching=False).score(batch, CHOICES)[50]
    cached = make_llm()
    cached.score([target], CHOICES)
    with_hit = cached.score([target], CHOICES)[0]
    assert cached.stats()["cached_prompt_tokens"] > 0
    assert in_batch == alone and with_hit == alone


@pytest.mark.parametrize("family", FAMILIES)
def test_int8_scores_are_batch_invariant(family, request, tmp_path):
    folder = request.getfixturevalue(family)
    target = random_prompt(300, 45)
    others = [random_prompt(400 + i, 5 + (i * 7) % 60) for i in range(99)]
    check_invariance(lambda **kw: tiny_llm(folder, quantization="int8", cache_dir=tmp_path, **kw), target, others)


def test_int8_greedy_decode_is_the_same_alone_and_in_a_batch(tiny_qwen2, tmp_path):
    llm = tiny_llm(tiny_qwen2, quantization="int8", cache_dir=tmp_path)
    params = SamplingParams(temperature=0.0, max_tokens=12, ignore_eos=True, logprobs=2)
    prompts = [random_prompt(900 + i, 7 + 11 * i) for i in range(9)]
    alone = llm.generate([prompts[4]], params)[0]
    together = llm.generate(prompts, params)[4]
    assert together.token_ids == alone.token_ids
    assert together.logprobs == alone.logprobs


@pytest.mark.parametrize("family", FAMILIES)
def test_int8_scores_stay_close_to_float32(family, request, tmp_path):
    folder = request.getfixturevalue(family)
    prompts = [random_prompt(500 + i, 10 + 13 * i) for i in range(4)]
    exact = tiny_llm(folder).score(prompts, CHOICES)
    approximate = tiny_llm(folder, quantization="int8", cache_dir=tmp_path).score(prompts, CHOICES)
    gap = max(abs(a - b) for row_e, row_a in zip(exact, approximate) for a, b in zip(row_e, row_a))
    assert 0.0 < gap < 0.2  # measured 0.03-0.09 on the tiny models; garbage is nats


@pytest.mark.parametrize("family", FAMILIES)
def test_int8_weights_with_float_activations_are_batch_invariant_and_closer_to_float32(family, request, tmp_path):
    """quantization="int8-weights": the same int8 weights (the same cache file), multiplied by float activations
    in row tiles; batch-invariant as the float path is, and nearer float32 than W8A8 (no activation rounding)."""
    folder = request.getfixturevalue(family)
    target = random_prompt(300, 45)
    others = [random_prompt(400 + i, 5 + (i * 7) % 60) for i in range(99)]
    check_invariance(lambda **kw: tiny_llm(folder, quantization="int8-weights", cache_dir=tmp_path, **kw), target,
                     others)
    prompts = [random_prompt(500 + i, 10 + 13 * i) for i in range(4)]
    exact = tiny_llm(folder).score(prompts, CHOICES)
    weights_only = tiny_llm(folder, quantization="int8-weights", cache_dir=tmp_path)
    both = tiny_llm(folder, quantization="int8", cache_dir=tmp_path).score(prompts, CHOICES)
    assert weights_only.engine.model.quantized_from == "cache"   # the int8 engine's file: the same weights
    model = weights_only.engine.model
    assert all(type(m) is int8.DequantizedInt8Weight for m in model.modules() if isinstance(m, Int8Weight))

    def gap(scores):
        return max(abs(a - b) for row_e, row_a in zip(exact, scores) for a, b in zip(row_e, row_a))
    assert 0.0 < gap(weights_only.score(prompts, CHOICES)) < gap(both)


def test_int8_weights_are_int8_in_memory(tiny_qwen2, tmp_path):
    model = tiny_llm(tiny_qwen2, quantization="int8", cache_dir=tmp_path).engine.model
    weights = [m for m in model.modules() if isinstance(m, Int8Weight)]
    config = model.config
    assert len(weights) == 4 * config.num_layers + 1  # Q/K/V, o_proj, gate/up, down per layer, and the LM head
    assert all(w.qweight.dtype == torch.int8 and w.scale.dtype == torch.float32 for w in weights)
    assert isinstance(model.logits_head, int8.DequantizedInt8Weight)   # its activations stay float
    floats = {name for name, p in model.named_parameters() if p.dim() == 2}
    assert floats == set()
    # tied: the float table serves the lookups only, read from the memory-mapped checkpoint, never copied
    assert isinstance(model.embed_tokens, TensorRows)
    assert all(not isinstance(layer.self_attn.o_weight, torch.nn.Parameter) for layer in model.layers)
    assert model.layers[0].self_attn.qkv.fused_bias is not None  # Qwen2's Q/K/V biases stay float


def test_quantized_weights_are_cached_once_and_rebuilt_for_another_recipe(tiny_llama, tmp_path, monkeypatch):
    prompts = [random_prompt(600 + i, 30) for i in range(2)]
    first = tiny_llm(tiny_llama, quantization="int8", cache_dir=tmp_path)
    assert first.engine.model.quantized_from == "built"
    [cached] = (tmp_path / "quantized").glob("*.safetensors")
    written = cached.stat().st_mtime_ns
    second = tiny_llm(tiny_llama, quantization="int8", cache_dir=tmp_path)
    assert second.engine.model.quantized_from == "cache" and cached.stat().st_mtime_ns == written
    assert second.score(prompts, CHOICES) == first.score(prompts, CHOICES)
    assert second.quantization == "int8" and tiny_llm(tiny_llama).quantization is None

    monkeypatch.setattr(quantization, "RECIPE", quantization.RECIPE + "-changed")
    third = tiny_llm(tiny_llama, quantization="int8", cache_dir=tmp_path)
    assert third.engine.model.quantized_from == "built"
    assert len(list((tmp_path / "quantized").glob("*.safetensors"))) == 2


def test_a_damaged_cache_file_is_rebuilt(tiny_llama, tmp_path):
    tiny_llm(tiny_llama, quantization="int8", cache_dir=tmp_path)
    [cached] = (tmp_path / "quantized").glob("*.safetensors")
    cached.write_bytes(b"not a safetensors file")
    again = tiny_llm(tiny_llama, quantization="int8", cache_dir=tmp_path)
    assert again.engine.model.quantized_from == "built"


@pytest.mark.parametrize("options, message", [
    ({"quantization": "int4"}, "quantization: expected None or one of"),
    ({"quantization": "int8", "dtype": "bfloat16"}, "computes activations in float32"),
    ({"quantization": "int8", "device": "cuda"}, "runs on the CPU only"),
])
def test_bad_quantization_options_name_the_field(options, message):
    with pytest.raises(EngineConfigError, match=message):
        EngineConfig(**options)


def test_int8_computes_in_float32_whatever_the_hardware_prefers():
    config = EngineConfig(quantization="int8", dtype="auto")
    assert config.dtype == "float32" and "int8" in config.dtype_reason
    assert EngineConfig(quantization="none").quantization is None


@pytest.mark.slow
def test_embedded_model_int8_scores_alone_equal_scores_in_a_batch_of_40():
    from judge_engine import LLM

    llm = LLM(enable_prefix_caching=False, quantization="int8", dtype="float32")
    system = "You grade an agent's work. Read the evidence, then answer Yes or No. "
    prompts = [f"{system}{'The agent wrote a report. ' * (i % 7)}Criterion {i}: the total is {i * 37} USD. Met?"
               for i in range(40)]
    targets = prompts[::4]
    alone = [llm.score([prompt], [" Yes", " No"])[0] for prompt in targets]
    together = llm.score(prompts, [" Yes", " No"])[::4]
    assert together == alone


def test_rubric_serve_quantization_int8_serves_the_int8_engine(tiny_llama, tmp_path, monkeypatch):
    import httpx

    from judge_engine import LLM
    from judge_engine.engine.llm_engine import LLMEngine
    from judge_engine.server.app import create_app
    from judge_engine.server.background import BackgroundServer
    from rubrics.cli.main import build_parser
    from rubrics.cli.serve import engine_config

    monkeypatch.setenv("RUBRICS_CACHE", str(tmp_path))
    parser = build_parser()
    assert engine_config(parser.parse_args(["serve", "--model", str(tiny_llama)])).quantization is None
    args = parser.parse_args(["serve", "--model", str(tiny_llama), "--quantization", "int8",
                              "--kv-cache-bytes", str(8 * 1024 * 1024)])
    config = engine_config(args)
    assert config.quantization == "int8"
    body = {"model": "tiny", "prompt": "The quick brown fox", "max_tokens": 6, "temperature": 0}
    with BackgroundServer(create_app(LLMEngine(config), "tiny")) as running:
        with httpx.Client(base_url=running.url, timeout=120) as http:
            response = http.post("/v1/completions", json=body)
    assert response.status_code == 200
    offline = LLM(str(tiny_llama), quantization="int8", cache_dir=tmp_path, dtype="float32")
    expected = offline.generate(body["prompt"], SamplingParams(temperature=0.0, max_tokens=6))[0].text
    assert response.json()["choices"][0]["text"] == expected
    assert offline.engine.model.quantized_from == "cache"  # the server's engine quantized into the same cache
