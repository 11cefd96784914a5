"""Summary statistics of per-iteration latency samples, and confidence intervals of a
median: within one process (order statistics of its samples) and between processes (the
spread of their medians)."""

import math
from functools import cache

import numpy as np

CONFIDENCE = 0.95
# Up to this many samples the ranks come from the exact binomial tail; beyond, from its
# normal approximation (off by a rank at most, at a coverage within 0.1% of 95%).
_EXACT_UP_TO = 1000
# Two-sided 95% quantiles of Student's t by degrees of freedom (1 to 30); beyond, 1.96.
_T95 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179,
        2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064,
        2.060, 2.056, 2.052, 2.048, 2.045, 2.042)


def summarize(samples_ms: list[float]) -> dict[str, float | list[float]]:
    x = np.sort(np.asarray(samples_ms, dtype=float))
    q25, median, q75, p90, p95, p99 = np.percentile(x, [25, 50, 75, 90, 95, 99])
    low, high, coverage = median_interval(x)
    return {
        "median_ms": float(median),
        "mean_ms": float(x.mean()),
        "p25_ms": float(q25),
        "p50_ms": float(median),
        "p75_ms": float(q75),
        "p90_ms": float(p90),
        "p95_ms": float(p95),
        "p99_ms": float(p99),
        "std_ms": float(x.std(ddof=1)) if x.size > 1 else 0.0,
        "iqr_ms": float(q75 - q25),
        "relative_iqr": float((q75 - q25) / median) if median > 0 else 0.0,
        "median_ci95_ms": [low, high],
        "median_ci95_coverage": coverage,
        "median_ci95_half_width": relative_half_width(float(median), low, high),
        "median_ci95_method": "order statistics of the samples (distribution-free)",
        "min_ms": float(x[0]),
        "max_ms": float(x[-1]),
    }


@cache
def median_ranks(n: int, confidence: float = CONFIDENCE) -> tuple[int, int, float]:
    """0-based ranks (low, high) of the distribution-free interval of the median of n
    samples, and its exact coverage.

    [x(k), x(n+1-k)] (1-based) covers the median with probability 1 − 2·P(B ≤ k−1),
    B ~ Binomial(n, ½), whatever the distribution. The narrowest such interval whose
    coverage is at least `confidence`; below 6 samples none is, and the interval is
    [min, max] with its (lower) coverage.
    """
    if n < 2:
        return 0, max(n - 1, 0), 0.0
    tail = (1 - confidence) / 2
    if n > _EXACT_UP_TO:
        z = _normal_quantile(1 - tail)
        k = max(1, math.floor((n - z * math.sqrt(n)) / 2))  # 1-based low rank
        cdf = 0.5 * (1 + math.erf((k - 0.5 - n / 2) / (math.sqrt(n) / 2) / math.sqrt(2)))
        return k - 1, n - k, 1 - 2 * cdf
    k, cdf = 0, 0.0  # invariant: cdf = P(B ≤ k − 1)
    log_half_n = -n * math.log(2)
    while k < n // 2:
        pmf = math.exp(math.lgamma(n + 1) - math.lgamma(k + 1) - math.lgamma(n - k + 1)
                       + log_half_n)
        if cdf + pmf > tail:  # one rank further in would cover less than `confidence`
            break
        cdf += pmf
        k += 1
    if k == 0:  # not even [min, max] reaches the confidence
        return 0, n - 1, 1 - 2 * 0.5**n
    return k - 1, n - k, 1 - 2 * cdf


def _normal_quantile(p: float) -> float:
    """The standard normal quantile (bisection on erf; p in (0.5, 1))."""
    low, high = 0.0, 10.0
    for _ in range(60):
        mid = (low + high) / 2
        if 0.5 * (1 + math.erf(mid / math.sqrt(2))) < p:
            low = mid
        else:
            high = mid
    return (low + high) / 2


def median_interval(sorted_x: np.ndarray | list[float]) -> tuple[float, float, float]:
    """The 95% interval of the median of sorted samples, and its exact coverage."""
    low, high, coverage = median_ranks(len(sorted_x))
    return float(sorted_x[low]), float(sorted_x[high]), coverage


def median_ci(sorted_x: np.ndarray) -> list[float]:
    """Distribution-free 95% confidence interval of the median of sorted samples."""
    low, high, _ = median_interval(sorted_x)
    return [low, high]


def relative_half_width(center: float, low: float, high: float) -> float:
    """How far the interval reaches from its centre, as a fraction of it: ±this."""
    if center <= 0:
        return 0.0
    return max(center - low, high - center) / center


def t95(dof: int) -> float:
    """The two-sided 95% quantile of Student's t with `dof` degrees of freedom."""
    return _T95[dof - 1] if 1 <= dof <= len(_T95) else 1.96


def between_processes(medians_ms: list[float], center: float | None = None) -> dict:
    """Spread of the medians of the same cell measured in separate processes, and the 95%
    interval of the cell's median that this spread gives: centre ± t·s/√k (k processes,
    s the standard deviation of their medians), around `center` (default: their mean).

    Samples of different processes are not independent draws from one distribution (each
    process has its own layout, clocks and neighbours), so the interval comes from the
    processes, not from the pooled samples. Its lower bound is at least 0: with few
    processes t·s/√k can exceed the centre (two seeds of 154.7 and 90.5 ms: 12.7·s/√2 is
    408 ms), and no time is negative.
    """
    x = np.asarray(medians_ms, dtype=float)
    mean = float(x.mean())
    std = float(x.std(ddof=1)) if x.size > 1 else 0.0
    center = mean if center is None else center
    half = t95(x.size - 1) * std / math.sqrt(x.size) if x.size > 1 else 0.0
    return {"processes": int(x.size), "median_of_medians_ms": float(np.median(x)),
            "cv": std / mean if mean > 0 else 0.0,
            "range_ms": float(x.max() - x.min()),
            "median_ci95_ms": [max(center - half, 0.0), center + half]}
