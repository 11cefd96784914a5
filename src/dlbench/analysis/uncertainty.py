"""Comparisons with their uncertainty, shared by every table that compares two timings.

Each timing is a median with a 95% confidence interval (dlbench.measure.stats). The ratio
of two medians gets the interval that their intervals allow (interval arithmetic on
positive numbers: the smallest numerator over the largest denominator, and the reverse),
which is conservative; and a ratio whose interval contains 1 is a tie, which is the same
as the two intervals overlapping.
"""

import numpy as np
import pandas as pd

TIE = "tie"


def ratio_interval(a, a_low, a_high, b, b_low, b_high) -> tuple:
    """a / b and its interval [a_low / b_high, a_high / b_low] (numbers or arrays; NaN where
    an interval is missing or not positive)."""
    a, a_low, a_high, b, b_low, b_high = (np.asarray(v, dtype=float) for v in
                                          (a, a_low, a_high, b, b_low, b_high))
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = a / b
        low = np.where((a_low > 0) & (b_high > 0), a_low / b_high, np.nan)
        high = np.where((a_high > 0) & (b_low > 0), a_high / b_low, np.nan)
    return _scalar(ratio), _scalar(low), _scalar(high)


def overlap(a_low, a_high, b_low, b_high):
    """Whether two intervals overlap (numbers or arrays)."""
    return (np.asarray(a_low) <= np.asarray(b_high)) & (np.asarray(b_low) <= np.asarray(a_high))


def verdict(low: float, high: float, below: str, above: str) -> str | None:
    """`below` when the ratio's interval lies below 1, `above` when above, "tie" when it
    contains 1; None without an interval."""
    if pd.isna(low) or pd.isna(high):
        return None
    if high < 1:
        return below
    if low > 1:
        return above
    return TIE


def _scalar(value: np.ndarray):
    return float(value) if value.ndim == 0 else value
