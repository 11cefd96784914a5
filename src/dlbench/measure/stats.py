"""Summary statistics of per-iteration latency samples."""

import numpy as np


def summarize(samples_ms: list[float]) -> dict[str, float]:
    x = np.asarray(samples_ms, dtype=float)
    q25, median, q75, p90, p99 = np.percentile(x, [25, 50, 75, 90, 99])
    return {
        "median_ms": float(median),
        "mean_ms": float(x.mean()),
        "p90_ms": float(p90),
        "p99_ms": float(p99),
        "std_ms": float(x.std(ddof=1)) if x.size > 1 else 0.0,
        "iqr_ms": float(q75 - q25),
        "min_ms": float(x.min()),
        "max_ms": float(x.max()),
    }
