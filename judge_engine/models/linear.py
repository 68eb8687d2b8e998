"""F.linear with results that do not depend on how many rows share the call (float32 on CPU).

MKL picks a different kernel for fewer than 16 rows (a matrix-vector product for one row), and those
kernels sum in another order, so a token's activations would change in the last bits depending on how
many other tokens were in the step. Padding such small calls to 16 rows keeps every row on the kernel
that larger steps use; the matmul is bound by reading the weights at that size, so the padding is
nearly free.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

MIN_GEMM_ROWS = 16


def linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
    rows = x.shape[0]
    if rows >= MIN_GEMM_ROWS or rows == 0 or x.dtype != torch.float32 or x.device.type != "cpu":
        return F.linear(x, weight, bias)
    padded = x.new_zeros((MIN_GEMM_ROWS, *x.shape[1:]))
    padded[:rows] = x
    return F.linear(padded, weight, bias)[:rows]
