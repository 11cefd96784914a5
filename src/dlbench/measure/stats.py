"""Summary statistics of per-iteration latency samples."""

import math

import numpy as np


def summarize(samples_ms: list[float]) -> dict[str, float | list[float]]:
    x = np.sort(np.asarray(samples_ms, dtype=float))
    q25, median, q75, p90, p95, p99 = np.percentile(x, [25, 50, 75, 90, 95, 99])
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
        "median_ci95_ms": median_ci(x),
        "min_ms": float(x[0]),
        "max_ms": float(x[-1]),
    }


def median_ci(sorted_x: np.ndarray, z: float = 1.96) -> list[float]:
    """Distribution-free 95% confidence interval of the median (binomial order statistics).

    The ranks n/2 ± z·√n/2 bound the median with ~95% probability whatever the
    distribution; with few samples the interval widens to the extremes.
    """
    n = sorted_x.size
    half_width = z * math.sqrt(n) / 2
    low = max(0, math.floor(n / 2 - half_width) - 1)
    high = min(n - 1, math.ceil(n / 2 + half_width) - 1)
    return [float(sorted_x[low]), float(sorted_x[high])]


def between_processes(medians_ms: list[float]) -> dict[str, float]:
    """Spread of the medians of the same cell measured in separate processes."""
    x = np.asarray(medians_ms, dtype=float)
    mean = float(x.mean())
    std = float(x.std(ddof=1)) if x.size > 1 else 0.0
    return {"processes": int(x.size), "median_of_medians_ms": float(np.median(x)),
            "cv": std / mean if mean > 0 else 0.0,
            "range_ms": float(x.max() - x.min())}
