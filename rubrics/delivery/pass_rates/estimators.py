"""Unbiased estimators of pass@k and pass^k from n graded attempts of which c succeeded.

pass@k: the chance that at least one of k attempts succeeds, 1 - C(n-c, k) / C(n, k) (Chen et al.,
2021, "Evaluating Large Language Models Trained on Code"). pass^k: the chance that all k attempts
succeed, C(c, k) / C(n, k) (Yao et al., 2024, tau-bench). Both are computed as products of ratios
near 1 instead of ratios of binomials, which overflow floats from n around 1030 and lose digits
well before. label_tasks.py turns a results file into per-task labels with them.
"""
from __future__ import annotations


def _validate(n: int, c: int, k: int) -> None:
    for name, value in (("n", n), ("c", c), ("k", k)):
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError(f"{name} must be an int, got {value!r}")
    if not 0 <= c <= n:
        raise ValueError(f"need 0 <= c <= n, got c={c}, n={n}")
    if not 1 <= k <= n:
        raise ValueError(f"need 1 <= k <= n, got k={k}, n={n}")


def pass_at_k(n: int, c: int, k: int) -> float:
    """Probability that at least one of k attempts, drawn without replacement from n with c successes, succeeds.

    >>> pass_at_k(16, 5, 1)
    0.3125
    >>> pass_at_k(4, 1, 4)
    1.0
    """
    _validate(n, c, k)
    if n - c < k:
        return 1.0   # every draw of k must contain a success
    # C(n-c, k) / C(n, k) = prod_{i=n-c+1}^{n} (1 - k / i)
    all_fail = 1.0
    for i in range(n - c + 1, n + 1):
        all_fail *= 1.0 - k / i
    return 1.0 - all_fail


def pass_hat_k(n: int, c: int, k: int) -> float:
    """Probability that all of k attempts, drawn without replacement from n with c successes, succeed.

    >>> pass_hat_k(16, 16, 8)
    1.0
    >>> pass_hat_k(4, 2, 2)
    0.16666666666666666
    """
    _validate(n, c, k)
    if c < k:
        return 0.0
    # C(c, k) / C(n, k) = prod_{i=0}^{k-1} (c - i) / (n - i)
    all_pass = 1.0
    for i in range(k):
        all_pass *= (c - i) / (n - i)
    return all_pass

