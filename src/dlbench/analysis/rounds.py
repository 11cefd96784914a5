"""Comparisons paired round by round (measurement.rounds).

A run in rounds measures every cell once per round, in fresh processes, the rounds
interleaved in time (dlbench.plan.rounds): a machine that slows for a minute slows the
cells of that round alike. So two cells are compared round by round: the log of their
ratio in each round, d_r = log(b_r / a_r), whose mean is the log of the ratio and whose
spread is what separates two fresh processes of the two cells measured minutes apart —
the machine's drift between rounds cancels in it.

With a few rounds, one pair's own spread is a poor estimate of that spread (3 rounds: 2
degrees of freedom, t = 4.3). The cells of a scenario share it: in the log of every
cell's round figures, a cell's level plus a round's level (the drift; both taken out by
medians, Tukey's median polish, so that one noisy cell does not pass for the machine's
drift) leave residuals whose variance, pooled over the scenario's cells — (cells − 1)
(rounds − 1) degrees of freedom — is the variance of one process's figure about its cell's
level (`Spread`). Cells measured side by side (measurement.process: side_by_side) were
timed in alternating slices with the other recipes of their size only: there a round's
level is each size's, and the residuals are taken within each size. A
pair's interval uses twice that (or the pair's own variance where it is larger: a noisier
pair is not narrowed by quieter ones), with Student's t at the pooled degrees of freedom.
The same residuals give each cell its spread between processes with the drift removed,
judged against the machine's own, measured in the same run: a cell is flagged `spread
between processes` where its spread is beyond the limit and beyond the other cells' by more
than an F-test at 1% for the scenario's cells together allows (Bonferroni) — a cell
whose processes vary as every cell's do is the machine's noise, which the intervals carry,
not the cell's.
"""

import math
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd
from scipy import stats

# A cell's spread between its rounds' processes, the drift removed, above which it is
# flagged (the harness's limit for repeats: dlbench.measure.flags).
from dlbench.analysis.uncertainty import ratio_interval
from dlbench.measure.flags import SPREAD_BETWEEN_PROCESSES_CV

LEVEL = 0.95


def figures(row) -> list[float] | None:
    """A cell's headline time of each round (ms): its median, or for a scenario ranked by
    the wall time per step (training) that; None without rounds."""
    wall = bool(row.get("headline_wall", False))
    values = row.get("rounds_wall_step_ms" if wall else "rounds_median_ms")
    if values is None or (not isinstance(values, list | tuple | np.ndarray)):
        return None
    values = [float(v) for v in values]
    return values if len(values) > 1 and all(v > 0 for v in values) else None


def level(row) -> float | None:
    """A cell's time over its rounds (ms): the geometric mean of its rounds' figures, the
    level its paired ratios compare (the mean of the logs of b_r / a_r is the log of the
    two levels' ratio), so that the fastest by level is the fastest by every paired ratio;
    None without rounds."""
    values = figures(row)
    return None if values is None else float(np.exp(np.mean(np.log(values))))


@dataclass(frozen=True)
class Spread:
    """The variance of the log of one process's figure about its cell's level, the drift
    between rounds removed, pooled over cells with the same number of rounds; its degrees
    of freedom; and each cell's own share of it (a coefficient of variation)."""

    variance: float
    df: int
    rounds: int
    cells: dict  # index → the cell's spread between processes, drift removed (CV)
    drift: list[float]  # each round's level against the mean (a fraction: 0.05 = 5% slower)
    beyond: dict  # index → whether the cell's spread is beyond the machine's (the others')
    # The variance of the log of a round's level (the machine's drift between rounds) and
    # its degrees of freedom: this scenario's own rounds − 1, or pooled over a run's
    # scenarios (run_spreads). None: from `drift`, rounds − 1.
    drift_variance: float | None = None
    drift_df: int | None = None

    def own_drift_variance(self) -> float:
        """The variance of the log of this scenario's own rounds' levels (rounds − 1
        degrees of freedom)."""
        return float(np.log1p(np.array(self.drift)).var(ddof=1))

    def drift_spread(self) -> tuple[float, int]:
        """The drift's variance and degrees of freedom: pooled where run_spreads pooled it,
        but never below this scenario's own (a scenario whose rounds lie further apart in
        time, the first of a round's order and the last of the next's, can drift more than
        the others: it is not narrowed by them)."""
        if self.drift_variance is not None:
            return max(self.drift_variance, self.own_drift_variance()), self.drift_df
        return self.own_drift_variance(), self.rounds - 1


def spread(cells: pd.DataFrame) -> Spread | None:
    """The pooled spread of a scenario's timed cells (see the module); None with fewer
    than two cells of two or more rounds."""
    found = {index: figures(row) for index, row in cells.iterrows()}
    found = {index: values for index, values in found.items() if values}
    if not found:
        return None
    rounds = max(len(v) for v in found.values())
    found = {index: v for index, v in found.items() if len(v) == rounds}
    if len(found) < 2:
        return None
    # Measured side by side, the cells of one size were timed together, slice by slice,
    # and only they share each round's pace: each size is a block of its own.
    blocks = {index: _block(cells.loc[index]) for index in found}
    sizes = {block: [i for i in found if blocks[i] == block] for block in blocks.values()}
    found = {index: v for index, v in found.items() if len(sizes[blocks[index]]) > 1}
    if len(found) < 2:
        return None
    residuals, order = np.zeros((len(found), rounds)), list(found)
    for members in sizes.values():
        if len(members) > 1:
            residuals[[order.index(i) for i in members]] = _polish(
                np.log(np.array([found[i] for i in members])))[0]
    drift = _polish(np.log(np.array(list(found.values()))))[1]
    df = sum(len(members) - 1 for members in sizes.values() if len(members) > 1) * (rounds - 1)
    squares = (residuals**2).sum(axis=1)
    variance = float(squares.sum() / df)
    share = df / len(found)  # each cell's degrees of freedom
    own = {index: math.sqrt(float(ss) / share) for index, ss in zip(found, squares, strict=True)}
    # Beyond the machine's own: a cell's variance above the others' (pooled without it) by
    # more than an F-test at 1% for the whole scenario allows (Bonferroni: each of its cells
    # at 1% / cells; at 1% each, one of a default run's 31 idle cells was flagged in about
    # a quarter of runs by chance alone), and above the limit.
    beyond = {}
    if len(found) > 2:
        rest = df - share
        critical = float(stats.f.ppf(1 - 0.01 / len(found), share, rest))
        for index, ss in zip(found, squares, strict=True):
            others = (squares.sum() - ss) / rest
            beyond[index] = (own[index] > SPREAD_BETWEEN_PROCESSES_CV
                             and ss / share > critical * others)
    return Spread(variance, df, rounds, own, [float(np.expm1(d)) for d in drift], beyond)


def _block(row) -> str:
    """The cells that shared each round's pace: those of one size measured side by side
    (measurement.process: side_by_side), else all of a scenario's."""
    sizes = row.get("process_side_by_side_sizes")
    return sizes if isinstance(sizes, str) and sizes else ""


def run_spreads(timed: pd.DataFrame) -> dict[str, Spread]:
    """Each scenario's `Spread` of a run's timed cells (the profiled left out); the
    scenarios ranked by their median (not training's wall time per step, whose rounds are
    seeds) with the same number of rounds share one variance: the machine's spread between
    processes, pooled over all their cells (sums of squares over degrees of freedom), so
    that a scenario of four cells (generation: 3 degrees of freedom, t = 3.2) is not left
    with a wide interval that the machine's noise does not justify. Each keeps its own
    drift (its rounds' levels) and its cells' own spreads; the drift's variance is pooled
    over every scenario (`Spread.drift_spread`: at least the scenario's own)."""
    from dlbench import scenarios as registry

    known = registry.scenarios()
    if "profiled" in timed:
        timed = timed[~timed["profiled"].astype(bool)]
    found = {scenario: pooled for scenario, cells in timed.groupby("scenario")
             if (pooled := spread(cells)) is not None}
    for rounds in {s.rounds for s in found.values()}:
        shared = [name for name, s in found.items()
                  if s.rounds == rounds and name in known and known[name].headline != "wall"]
        if len(shared) < 2:
            continue
        df = sum(found[name].df for name in shared)
        variance = sum(found[name].variance * found[name].df for name in shared) / df
        for name in shared:
            found[name] = replace(found[name], variance=variance, df=df)
    # The machine drifts alike whatever a scenario measures: each scenario's rounds are
    # samples of its drift (2 rounds: one degree of freedom each, t = 12.7, and a cell's
    # interval of ±53% in a default run whose inference rounds differed by 8%), so their
    # variances pool over the run's scenarios, as the spread between processes does.
    if len(found) > 1:
        own = {name: (s.own_drift_variance(), s.rounds - 1) for name, s in found.items()}
        df = sum(df for _, df in own.values())
        variance = sum(v * df for v, df in own.values()) / df
        found = {name: replace(pooled, drift_variance=variance, drift_df=df)
                 for name, pooled in found.items()}
    return found


def _polish(logs: np.ndarray, sweeps: int = 4) -> tuple[np.ndarray, np.ndarray]:
    """Tukey's median polish of cells × rounds: the residuals once each cell's level and
    each round's (the drift) are taken out by medians, and the drift — medians, so that one
    noisy cell does not pass for the machine's drift and spread to the others."""
    residuals, drift = logs - np.median(logs, axis=1, keepdims=True), np.zeros(logs.shape[1])
    for _ in range(sweeps):
        step = np.median(residuals, axis=0)
        drift += step
        residuals -= step
        residuals -= np.median(residuals, axis=1, keepdims=True)
    return residuals, drift - np.median(drift)


def paired(slower, faster, pooled: Spread | None) -> tuple[float, float, float, int] | None:
    """slower's figure over faster's, paired by round, with its 95% interval and the
    rounds it rests on: (ratio, low, high, rounds); None where either lacks rounds or
    their rounds differ in number."""
    a, b = figures(faster), figures(slower)
    if a is None or b is None or len(a) != len(b):
        return None
    d = np.log(np.array(b)) - np.log(np.array(a))
    n = len(d)
    own = float(d.var(ddof=1))
    if pooled is not None and pooled.rounds == n:
        variance, df = max(2 * pooled.variance, own), pooled.df
    else:
        variance, df = own, n - 1
    half = stats.t.ppf(0.5 + LEVEL / 2, df) * math.sqrt(variance / n)
    mean = float(d.mean())
    return math.exp(mean), math.exp(mean - half), math.exp(mean + half), n


def ratio_of(slower, faster, pooled: Spread | None) -> tuple[float, float, float, int]:
    """slower's headline time over faster's (two cells' rows) with its 95% interval and the
    rounds it rests on: paired round by round where both were measured in the same rounds
    (`paired`), else from the two headline figures' intervals (0 rounds)."""
    by_round = paired(slower, faster, pooled)
    if by_round is not None:
        return by_round
    return (*ratio_interval(slower["headline_ms"], slower["headline_ci95_ms_low"],
                            slower["headline_ci95_ms_high"], faster["headline_ms"],
                            faster["headline_ci95_ms_low"], faster["headline_ci95_ms_high"]), 0)


def level_interval(row, pooled: Spread) -> tuple[float, float] | None:
    """The 95% interval of a cell's median (`median_ms`) over fresh processes, from its
    rounds: a process's figure varies about the cell's level by the pooled spread (or the
    cell's own, where larger) and by the machine's drift between rounds, which a single
    cell's level does not cancel; the mean of k rounds by (σ² + τ²) / k (σ² the pooled
    variance or the cell's own, where larger, as `paired` takes it), with Student's t
    at Welch-Satterthwaite's degrees of freedom. Two rounds alone give t with 1 degree of
    freedom (12.7: intervals beyond every sample measured); pooled over a scenario's cells,
    σ is known far better, and τ pooled over the run's scenarios (run_spreads) better than
    from one scenario's rounds. None where the cell lacks the pooled rounds."""
    values = figures(row)
    if values is None or len(values) != pooled.rounds or pooled.rounds < 2:
        return None
    k = pooled.rounds
    # A noisier cell is not narrowed by quieter ones (as `paired` has it).
    cell_variance = max(pooled.variance, pooled.cells.get(row.name, 0.0) ** 2)
    cell_df = pooled.df
    drift_variance, drift_df = pooled.drift_spread()
    a, b = cell_variance / k, drift_variance / k
    df = (a + b) ** 2 / (a**2 / cell_df + b**2 / drift_df) if a + b > 0 else cell_df
    half = stats.t.ppf(0.5 + LEVEL / 2, df) * math.sqrt(a + b)
    center = float(row["median_ms"])
    return center * math.exp(-half), center * math.exp(half)


def spread_flags(cells: pd.DataFrame, pooled: Spread | None) -> pd.Series:
    """For each cell of `cells`, the reason its processes disagree beyond the machine's
    drift ('' where they do not, or where it has no rounds)."""
    reasons = pd.Series("", index=cells.index)
    if pooled is None:
        return reasons
    machine = math.sqrt(pooled.variance)
    for index, cv in pooled.cells.items():
        if pooled.beyond.get(index):
            reasons[index] = (f"spread between processes: its {pooled.rounds} rounds vary by "
                              f"{cv:.1%} beyond the machine's drift, more than the run's other "
                              f"cells ({machine:.1%}) and the limit "
                              f"({SPREAD_BETWEEN_PROCESSES_CV:.0%})")
    return reasons


# The answer's target width: a ratio's 95% interval within ±10% of it (issue 38).
WIDTH = 0.10
MOST_ROUNDS = 50  # beyond this, rounds are no advice: the spread must come down instead


def half_width(pooled: Spread, rounds: int) -> float:
    """The relative half-width (0.10: ±10%) of a paired ratio's 95% interval at `rounds`
    rounds, with the pooled spread a pair of cells shares (`paired`, a pair's own spread
    left aside) and the degrees of freedom its cells would pool at that many rounds."""
    cells_less_one = pooled.df / (pooled.rounds - 1)
    df = max(1.0, cells_less_one * (rounds - 1))
    half = stats.t.ppf(0.5 + LEVEL / 2, df) * math.sqrt(2 * pooled.variance / rounds)
    return math.expm1(half)


def rounds_for(pooled: Spread, width: float = WIDTH) -> int | None:
    """The fewest rounds whose paired ratios' intervals would be within ±width at this
    run's spread between processes; None beyond MOST_ROUNDS."""
    return next((n for n in range(2, MOST_ROUNDS + 1) if half_width(pooled, n) <= width),
                None)


def width_note(pooled: Spread | None, key: str) -> str:
    """'' where the run's rounds put a ratio's interval within ±WIDTH; else what they give
    and how many rounds (the config `key`) would reach it at the spread measured."""
    if pooled is None or pooled.rounds < 2:
        return ""
    now = half_width(pooled, pooled.rounds)
    if now <= WIDTH:
        return ""
    needed = rounds_for(pooled)
    advice = (f"±{WIDTH:.0%} would take `{key}: {needed}`" if needed else
              f"±{WIDTH:.0%} would take more than {MOST_ROUNDS} rounds: the spread must "
              "come down (an idle machine, `bench/spread.py`)")
    return (f"Between fresh processes this run's times spread by "
            f"{math.sqrt(pooled.variance):.1%} about each cell's level (the drift between "
            f"rounds taken out; pooled over the cells), so with {pooled.rounds} rounds a "
            f"ratio's 95% interval spans about ±{now:.0%}; {advice}.")
