"""What a comparison can see: the smallest change it calls significant in 80% of runs (its
minimum detectable change, from the spread it measured), and how many interleaved rounds a
given change needs.

Interleaved sides (`dlbench compare --interleave`) are judged by a paired t-test of the
rounds' log ratios: with a spread `s` of those logs and `n` rounds, a true change of
exp((t₀.₉₇₅ + t₀.₈₀) · s / √n) − 1 (t with n − 1 degrees of freedom) is called significant in
80% of runs — the usual power analysis, t for the normal because s is estimated. Sides
measured one after the other need their interval, widened by the drift floor, to exclude
1: no change inside the floor is ever seen, whatever the rounds, and what the interval
adds on top of it is scaled to 80% power the same way.
"""

import math

import numpy as np

ALPHA = 0.05
POWER = 0.80
_Z_HALF, _Z_POWER = 1.959964, 0.841621  # the normal's 97.5% and 80% points
# More rounds than this is no advice: "more than 200" says that interleaving cannot buy it.
MOST_ROUNDS = 200


def paired_change(log_sd: float, rounds: int) -> float:
    """The smallest relative change (0.05: 5%) that `rounds` interleaved rounds whose log
    ratios spread by log_sd (standard deviation) detect in 80% of runs; NaN under 2
    rounds or without a spread."""
    if rounds < 2 or not np.isfinite(log_sd) or log_sd < 0:
        return math.nan
    from scipy.stats import t as student

    k = rounds - 1
    factor = float(student.ppf(1 - ALPHA / 2, k) + student.ppf(POWER, k))
    return math.expm1(factor * log_sd / math.sqrt(rounds))


def rounds_for(change: float, log_sd: float) -> float:
    """The fewest interleaved rounds that detect `change` in 80% of runs with that spread
    of the rounds' log ratios; infinite where it would take more than MOST_ROUNDS, NaN
    where the spread is unknown."""
    if not np.isfinite(log_sd) or log_sd < 0:
        return math.nan
    if paired_change(log_sd, 2) <= change:
        return 2
    if paired_change(log_sd, MOST_ROUNDS) > change:
        return math.inf
    low, high = 2, MOST_ROUNDS  # paired_change falls with the rounds: bisect
    while high - low > 1:
        middle = (low + high) // 2
        if paired_change(log_sd, middle) <= change:
            high = middle
        else:
            low = middle
    return high


def floor_change(floor: float, low: float, ratio: float, high: float) -> float:
    """Sides measured one after the other: the smallest change detected in 80% of runs, for
    a ratio interval [low, high] around `ratio` before the drift floor widens it by
    (1 + floor) either way: the floor, plus the interval's half-width on the log scale
    scaled from 95% to 80% power. NaN without an interval."""
    if not all(np.isfinite(v) and v > 0 for v in (low, ratio, high)):
        return math.nan
    half = max(math.log(high / ratio), math.log(ratio / low))
    return math.expm1(math.log1p(floor) + half * (_Z_HALF + _Z_POWER) / _Z_HALF)


def pooled_log_sd(a: list[float] | None, b: list[float] | None) -> float:
    """The spread a round's log ratio would have if the sides' processes were paired: the
    root of the sum of each side's variance of log process figures (pairing only removes
    drift, so this bounds it from above); NaN without two processes a side."""
    if not a or not b or len(a) < 2 or len(b) < 2:
        return math.nan
    return math.sqrt(float(np.var(np.log(a), ddof=1) + np.var(np.log(b), ddof=1)))
