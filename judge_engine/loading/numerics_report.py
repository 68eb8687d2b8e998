"""What the engine computes with on this CPU, and why: the float dtype it picks when none is asked for, and how
int8 products are computed (both chosen by probes at start-up; `rubric model list` prints this report)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class CpuNumerics:
    cpu: str            # the model name and the flags that decide matrix-product speed
    float_dtype: str    # the dtype a CPU engine computes in when none is asked for
    float_reason: str
    int8_method: str    # "int_mm" (torch._int_mm), "avx2" (int8_avx2.c) or "float32" (float32 products of int8s)
    int8_reason: str

    def lines(self) -> list[str]:
        return [f"this CPU: {self.cpu}",
                f"float products: {self.float_dtype} ({self.float_reason})",
                f"int8 products: {self.int8_method} ({self.int8_reason})"]


def cpu_numerics() -> CpuNumerics:
    """Runs the probes the engine runs (a fraction of a second, once per process)."""
    from judge_engine.layers.int8_linear import int8_products
    from judge_engine.loading.cpu_info import host_cpu
    from judge_engine.loading.dtype_choice import resolve_dtype

    dtype = resolve_dtype(None, "cpu")
    products = int8_products()
    return CpuNumerics(host_cpu().describe(), dtype.dtype, dtype.reason, products.method, products.reason)
