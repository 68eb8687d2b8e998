"""What the engine computes with on this CPU, and why: the float dtype it picks when none is asked for, how int8
products are computed (both chosen by probes at start-up), which kernel multiplies in float32, and how a GGUF's
weights are held (`rubric model list` prints this report)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class CpuNumerics:
    cpu: str            # the model name and the flags that decide matrix-product speed
    float_dtype: str    # the dtype a CPU engine computes in when none is asked for
    float_reason: str
    int8_method: str    # "vnni" (int8_groups_vnni.c), "avx2" (int8_avx2.c), or group slices through "int_mm"
                        # (torch._int_mm) or "float32" (float32 products of int8s)
    int8_reason: str
    gguf_weights: str   # "blocks" or "float32" (JUDGE_ENGINE_GGUF_WEIGHTS)
    gguf_reason: str
    float32_route: str  # "float_gemm.c" (the engine's kernel) or "row tiles through torch"
    float32_reason: str

    def lines(self) -> list[str]:
        return [f"this CPU: {self.cpu}",
                f"float products: {self.float_dtype} ({self.float_reason})",
                f"int8 products: {self.int8_method} ({self.int8_reason})",
                f"GGUF weights: {self.gguf_weights} ({self.gguf_reason})",
                f"float32 products: {self.float32_route} ({self.float32_reason})"]


def cpu_numerics() -> CpuNumerics:
    """Runs the probes the engine runs (a fraction of a second, once per process)."""
    from judge_engine.layers import block_weight, float_gemm
    from judge_engine.layers.int8_linear import int8_products
    from judge_engine.loading.cpu_info import host_cpu
    from judge_engine.loading.dtype_choice import resolve_dtype
    from judge_engine.loading.gguf_resident import WEIGHTS_ENV, gguf_weights_choice

    dtype = resolve_dtype(None, "cpu")
    products = int8_products()
    weights = gguf_weights_choice()
    if weights == "blocks":
        rebuilt = block_weight.kernel()
        how = rebuilt.reason if rebuilt.function else f"rebuilt with torch's operations: {rebuilt.reason}"
        reason = f"kept in the file's block formats, each chunk rebuilt as it is multiplied; {how}"
    else:
        reason = f"a float32 copy written once ({WEIGHTS_ENV}=float32)"
    gemm = float_gemm.kernel()
    route = "float_gemm.c" if gemm.function else "row tiles through torch"
    return CpuNumerics(host_cpu().describe(), dtype.dtype, dtype.reason, products.method, products.reason, weights,
                       reason, route, gemm.reason)
