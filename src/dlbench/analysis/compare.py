"""Two result sets, cell by cell: what got slower, what got faster, what is inside the noise.

For every cell that both sets hold and that is ok (timed) in both: the baseline's and the
new set's time as the report ranks cells (`headline_ms`): the median (host-timed), or for
training the wall time per step (a training cell's median step can move between the
clusters of a bursty pipeline's steps) where both sides recorded it — else the medians,
and the `statistic` column says which —, their ratio new/baseline with its 95% interval,
and a verdict. How the interval is made, and so what it covers, depends on how the two
sets were measured:

- **Interleaved** (`dlbench compare --interleave`: the two sides' processes alternated,
  A B B A …, round by round): the interval is a paired t-interval of the rounds' ratios
  (the log of new/baseline of each round's process medians, or wall times per step); the
  ratio is their geometric mean. It covers the spread between fresh processes *and* the
  machine's drift, which moves both sides of a round alike.
- **One after the other** (two runs measured at different times): the interval of the
  ratio comes from the two times' intervals (`dlbench.analysis.uncertainty`) — within
  one process for a side measured once, between its processes with `repeats` — widened
  by the drift floor (`DRIFT_FLOOR`): runs of identical code minutes apart differ by more
  than any interval of one run sees (bench/compare_false_alarms.py measures how much).
  Where a side has several processes, a two-sided Mann-Whitney U test of the processes'
  medians (wall times) must agree (p < 0.05; with 3 against 3 its smallest p is 0.1:
  measure 4 or more; none where a side recorded no wall time per process); the
  per-iteration samples of one process are never tested against another's, as they are
  not independent draws across processes.

The verdict is a *regression* (ratio above 1) or an *improvement* (below 1) only if the
interval excludes 1 and, where there is a test, p < 0.05; anything else is *not
significant*. Sides measured one after the other give no verdict for a cell that either
side flagged with a noise flag of the report's (dlbench.measure.flags.NOISE: unstable, noisy or
busy machine, spread between processes, interval not reached): it is *not decided*, the
flag its reason. Cells
not ok in either set are *not compared* and keep their statuses; cells of one set only
are listed apart.
"""

import math
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from dlbench.analysis import detectable, uncertainty
from dlbench.analysis.environment import all_fields, fields, precision_settings
from dlbench.analysis.resultset import ResultSet
from dlbench.format import count, fmt_fixed, fmt_ms, fmt_percent
from dlbench.measure.flags import NOISE

ALPHA = 0.05
# The change that two runs of identical code measured one after the other can show
# without any cause in the code (the machine's drift, a process's layout): a ratio's
# interval is widened by this much either way unless the sides were interleaved. Issue 20
# measured identical code minutes apart on a quiet 2-core VM differing by up to 20.2%
# (bert-base, 164 → 131 ms); bench/compare_false_alarms.py measures it here.
DRIFT_FLOOR = 0.25
REGRESSION, IMPROVEMENT = "regression", "improvement"
NOT_SIGNIFICANT, NOT_DECIDED = "not significant", "not decided"
NOT_COMPARED = "not compared"
ORDER = (REGRESSION, IMPROVEMENT, NOT_SIGNIFICANT, NOT_DECIDED, NOT_COMPARED)
# The report's noise flags (something besides the code set a side's timing): sides
# measured one after the other get no verdict from such a cell.
NOISE_FLAGS = {name: name.replace("_", " ") for name in NOISE}
# The time compared: the median, or where both sides have it (training) the wall time per
# step as the report ranks cells (analysis.summary.headline: in rounds, the geometric mean
# of the rounds'); per side: ms, low, high.
MEDIAN, WALL = "median", "wall time per step"
_TIMING = {MEDIAN: ("median_ms", "median_ci95_ms_low", "median_ci95_ms_high"),
           WALL: ("headline_ms", "headline_ci95_ms_low", "headline_ci95_ms_high")}


@dataclass
class Comparison:
    """cells: one row per cell of both sets, regressions first, each group by the size of
    its change; only_baseline, only_new: cell_id and status of the cells of one set;
    environment: field, baseline, new — the fingerprint differences that matter;
    elsewhere: each set's cells from another machine or dlbench version than most of its
    own (set, cell_id, status, from, compared), left out unless that set mixes them."""

    baseline: str
    new: str
    cells: pd.DataFrame
    only_baseline: pd.DataFrame
    only_new: pd.DataFrame
    environment: pd.DataFrame
    interleaved: bool = False
    floor: float = DRIFT_FLOOR
    elsewhere: pd.DataFrame = field(default_factory=pd.DataFrame)

    def count(self, verdict: str) -> int:
        return int(self.cells["verdict"].eq(verdict).sum())

    def headline(self) -> str:
        """'4 cells in both sets: 1 regression, 0 improvements, 2 not significant, 1 not
        compared (not ok in a set)'."""
        return (f"{count(len(self.cells), 'cell')} in both sets: "
                f"{count(self.count(REGRESSION), 'regression')}, "
                f"{count(self.count(IMPROVEMENT), 'improvement')}, "
                f"{self.count(NOT_SIGNIFICANT)} not significant, "
                f"{self.count(NOT_DECIDED)} not decided (a noise flag), "
                f"{self.count(NOT_COMPARED)} not compared (not ok in a set)")

    def sees(self) -> str:
        """What this comparison can see, from the spread it measured: the median cell's
        smallest change detected in 80% of runs, and the interleaved rounds a 5% change
        needs (per cell: the `detectable` and `rounds_for_5pct` columns)."""
        timed = self.cells[self.cells["verdict"].ne(NOT_COMPARED)]
        seen = timed["detectable"].dropna().astype(float)
        if seen.empty:
            return ""
        could = (f"in 80% of runs it calls a change of {fmt_percent(float(seen.median()))} "
                 f"or more significant (the median cell; per cell: 'can see')")
        rounds = timed["rounds_for_5pct"].dropna().astype(float)
        needed = float(rounds.median()) if len(rounds) else math.nan
        needs = (f"more than {detectable.MOST_ROUNDS} rounds" if math.isinf(needed)
                 else f"{math.ceil(needed)} rounds" if len(rounds) else "")
        if self.interleaved:
            return (f"{could}; a {SMALL_CHANGE:.0%} change would need {needs} "
                    f"(per cell: 'rounds for {SMALL_CHANGE:.0%}')")
        later = (f"measured with `--interleave`, a {SMALL_CHANGE:.0%} change would need "
                 f"{needs} (from the spread between each side's processes)" if len(rounds)
                 else "`--interleave` measures the spread between rounds, and from it the "
                 f"rounds a {SMALL_CHANGE:.0%} change needs")
        return (f"measured one after the other, no change inside the ±{self.floor:.0%} "
                f"drift floor is ever seen: {could}; {later}")

    def rule(self) -> str:
        """When a change counts as significant, and what its interval covers."""
        if self.interleaved:
            return ("the sides were interleaved (A B B A … in fresh processes): the 95% "
                    "interval of new/baseline is a paired t-interval of the rounds' ratios, "
                    "so it covers the spread between processes and the machine's drift; "
                    "significant: it excludes 1 (p < 0.05)")
        return (f"the sides were measured one after the other: the 95% interval of "
                f"new/baseline covers the spread within one process (one process a side) or "
                f"between a side's processes (repeats), widened by ±{self.floor:.0%} for the "
                f"drift between runs made at different times; significant: it excludes 1, "
                f"and p < 0.05 where both sides have several processes; a cell that a side "
                f"flagged with a noise flag (the report's) is not decided. `dlbench compare "
                f"--interleave` measures both sides alternately and needs neither")


def compare(baseline: ResultSet, new: ResultSet, interleaved: bool = False,
            floor: float = DRIFT_FLOOR) -> Comparison:
    """interleaved: the two sets' processes alternated round by round (`--interleave`),
    so that the i-th process of a cell in one set pairs with the i-th in the other."""
    a, b = baseline.summary.set_index("cell_id"), new.summary.set_index("cell_id")
    common = [cell for cell in a.index if cell in b.index]
    rows = [_row(cell, a.loc[cell], b.loc[cell], baseline, new, interleaved, floor)
            for cell in common]
    cells = pd.DataFrame(rows, columns=_COLUMNS)
    rank = cells["verdict"].map(ORDER.index)
    size = -np.abs(np.log(cells["ratio"].astype(float)))
    cells = cells.assign(_rank=rank, _size=size.fillna(0)).sort_values(
        ["_rank", "_size", "cell_id"]).drop(columns=["_rank", "_size"]).reset_index(drop=True)
    sides = [side.elsewhere.assign(set=name) for name, side in
             (("baseline", baseline), ("new", new)) if not side.elsewhere.empty]
    return Comparison(baseline.name, new.name, cells, _alone(a, b), _alone(b, a),
                      differences(baseline.summary, new.summary), interleaved, floor,
                      pd.concat(sides, ignore_index=True) if sides else pd.DataFrame())


_COLUMNS = ["cell_id", "statistic", "baseline_status", "new_status", "baseline_ms",
            "baseline_low", "baseline_high", "new_ms", "new_low", "new_high", "ratio",
            "ratio_low", "ratio_high", "p_value", "test", "covers", "verdict", "reason",
            "detectable", "rounds_for_5pct"]
# The change whose rounds `rounds_for_5pct` gives.
SMALL_CHANGE = 0.05


def _row(cell: str, a: pd.Series, b: pd.Series, baseline: ResultSet, new: ResultSet,
         interleaved: bool, floor: float) -> dict:
    statistic = _statistic(cell, a, b, baseline, new, interleaved)
    row = {"cell_id": cell, "statistic": statistic, "baseline_status": a["status"],
           "new_status": b["status"]}
    for side, values in (("baseline", a), ("new", b)):
        row.update({f"{side}_{name}": values[column] for column, name in
                    zip(_TIMING[statistic], ("ms", "low", "high"), strict=True)})
    if not (a["timed"] and b["timed"]):
        return {**row, "verdict": NOT_COMPARED}
    rounds_a, rounds_b = (_processes(side, cell, statistic) for side in (baseline, new))
    if interleaved and rounds_a and rounds_b and len(rounds_a) == len(rounds_b):
        ratio, low, high, p_value = paired(rounds_a, rounds_b)
        test = f"paired t, {len(rounds_a)} interleaved rounds"
        covers = "between processes and drift (interleaved)"
        spread = float(np.std(np.log(np.divide(rounds_b, rounds_a)), ddof=1))
        row.update(detectable=detectable.paired_change(spread, len(rounds_a)),
                   rounds_for_5pct=detectable.rounds_for(SMALL_CHANGE, spread))
    else:
        ratio, low, high = uncertainty.ratio_interval(
            row["new_ms"], row["new_low"], row["new_high"],
            row["baseline_ms"], row["baseline_low"], row["baseline_high"])
        # Interleaved, the rounds would pair; the spread of each side's processes bounds
        # their log ratios' (unknown with one process a side).
        row.update(detectable=detectable.floor_change(floor, low, ratio, high),
                   rounds_for_5pct=detectable.rounds_for(
                       SMALL_CHANGE, detectable.pooled_log_sd(rounds_a, rounds_b)))
        low, high = low / (1 + floor), high * (1 + floor)
        p_value, test = _test(rounds_a, rounds_b, statistic, baseline, new, cell)
        several = all(cell in side.processes for side in (baseline, new))
        within = ("between processes" if several else "within one process"
                  if cell in baseline.samples and cell in new.samples else "the summaries'")
        covers = f"{within} ±{floor:.0%} drift floor"
        flagged = [f"{NOISE_FLAGS[name]} in {side}" for side, values in
                   (("baseline", a), ("new", b)) for name in NOISE_FLAGS
                   if _set(values.get(f"flags_{name}"))]
        if flagged:
            return {**row, "ratio": ratio, "ratio_low": low, "ratio_high": high,
                    "p_value": p_value, "test": test, "covers": covers,
                    "verdict": NOT_DECIDED, "reason": "; ".join(flagged)}
    return {**row, "ratio": ratio, "ratio_low": low, "ratio_high": high, "p_value": p_value,
            "test": test, "covers": covers, "verdict": verdict(low, high, p_value)}


def _set(flag) -> bool:
    """A stored flag that is on (not missing: a v1 record has no such flag)."""
    return isinstance(flag, bool | np.bool_) and bool(flag)


def _statistic(cell: str, a: pd.Series, b: pd.Series, baseline: ResultSet, new: ResultSet,
               interleaved: bool) -> str:
    """WALL where both sides rank the cell by its wall time per step (summary.headline),
    unless interleaved sides lack each process's (recorded before it): their rounds then
    pair on the medians; MEDIAN otherwise."""
    if not (_set(a.get("headline_wall")) and _set(b.get("headline_wall"))):
        return MEDIAN
    if interleaved and not all(cell in side.process_walls for side in (baseline, new)):
        return MEDIAN
    return WALL


def _processes(side: ResultSet, cell: str, statistic: str) -> list[float] | None:
    """Each of a cell's processes' figure of `statistic`, if it ran in several."""
    return (side.process_walls if statistic == WALL else side.processes).get(cell)


def _test(rounds_a: list[float] | None, rounds_b: list[float] | None, statistic: str,
          baseline: ResultSet, new: ResultSet, cell: str) -> tuple[float, str]:
    """Mann-Whitney on the processes' figures where both sides have several processes;
    no test otherwise (a side's single process gives one median, and its iterations are
    no draws of another process's)."""
    if rounds_a and rounds_b:
        kind = "process wall times per step" if statistic == WALL else "process medians"
        return mann_whitney(rounds_a, rounds_b, kind)
    if cell in baseline.processes and cell in new.processes:  # recorded before process walls
        return np.nan, "none (a side has no wall time per step of each process)"
    if cell in baseline.samples and cell in new.samples:
        return np.nan, "none (one process in a side)"
    return np.nan, "none (a summary has no samples)"


def paired(a: list[float], b: list[float]) -> tuple[float, float, float, float]:
    """The geometric mean of the ratios b_i / a_i, its 95% paired t-interval and the
    two-sided p-value of a paired t-test on their logs (a_i and b_i measured side by
    side, so that drift cancels in each ratio)."""
    from scipy.stats import t as student

    logs = np.log(np.asarray(b, dtype=float) / np.asarray(a, dtype=float))
    mean, n = float(logs.mean()), logs.size
    se = float(logs.std(ddof=1)) / np.sqrt(n)
    half = float(student.ppf(0.975, n - 1)) * se
    # Identical ratios in every round (se 0): certain if they differ from 1, else a tie.
    p_value = float(2 * student.sf(abs(mean) / se, n - 1)) if se > 0 else float(mean == 0)
    return float(np.exp(mean)), float(np.exp(mean - half)), float(np.exp(mean + half)), p_value


def mann_whitney(a: list[float], b: list[float], kind: str) -> tuple[float, str]:
    """The two-sided Mann-Whitney U test's p-value of two samples and a description of
    the test ('process medians 4/4'); NaN and 'none (…)' where a side has no samples."""
    from scipy.stats import mannwhitneyu

    if not len(a) or not len(b):
        return np.nan, "none (a summary has no samples)"
    p_value = float(mannwhitneyu(b, a, alternative="two-sided").pvalue)
    return p_value, f"{kind} {len(a)}/{len(b)}"


def verdict(low: float, high: float, p_value: float) -> str:
    """Regression or improvement only if p < ALPHA and the ratio's interval [low, high]
    excludes 1 (without a p-value — no test — the interval alone decides)."""
    moved = uncertainty.verdict(low, high, below=IMPROVEMENT, above=REGRESSION)
    if moved in (None, uncertainty.TIE) or p_value >= ALPHA:  # NaN >= ALPHA is False
        return NOT_SIGNIFICANT
    return moved


def _alone(here: pd.DataFrame, there: pd.DataFrame) -> pd.DataFrame:
    cells = here[~here.index.isin(there.index)]
    return cells.reset_index()[["cell_id", "status"]]


def differences(a: pd.DataFrame, b: pd.DataFrame) -> pd.DataFrame:
    """The fingerprint fields that matter for a comparison (`analysis.environment`:
    hardware, driver, libraries on the measured path, TF32) whose known values differ
    between the two sets; one row per field with each set's values."""
    fa, fb = fields(a), fields(b)
    rows = []
    for label in (f.label for f in all_fields() if f.matters):
        va, vb = (_known(f[label]) if label in f else [] for f in (fa, fb))
        if va and vb and va != vb:
            rows.append((label, ", ".join(va), ", ".join(vb)))
    pa, pb = precision_settings(a), precision_settings(b)
    for precision in sorted(set(pa) & set(pb)):
        if pa[precision] != pb[precision]:
            rows.append((f"TF32 ({precision} cells)", ", ".join(pa[precision]),
                         ", ".join(pb[precision])))
    return pd.DataFrame(rows, columns=["field", "baseline", "new"])


def _known(values: pd.Series) -> list[str]:
    return sorted(values.dropna().astype(str).unique())


def readable(cells: pd.DataFrame) -> pd.DataFrame:
    """The comparison as the terminal and the HTML page show it."""
    def interval(low, high):
        return "" if pd.isna(low) else f"[{fmt_fixed(low, 3)}, {fmt_fixed(high, 3)}]"

    change = cells["ratio"].astype(float) - 1
    return pd.DataFrame({
        "verdict": cells["verdict"],
        "cell": cells["cell_id"],
        "time": cells["statistic"],
        "baseline (ms)": [fmt_ms(v) for v in cells["baseline_ms"]],
        "new (ms)": [fmt_ms(v) for v in cells["new_ms"]],
        "change": [("+" if v > 0 else "") + fmt_percent(v) if pd.notna(v) else ""
                   for v in change],
        "new/baseline": [fmt_fixed(v, 3) for v in cells["ratio"]],
        "95% interval": [interval(lo, hi) for lo, hi in
                         zip(cells["ratio_low"], cells["ratio_high"], strict=True)],
        "p": [_p(v) for v in cells["p_value"]],
        "can see": [f"±{fmt_percent(v)}" if pd.notna(v) else "" for v in cells["detectable"]],
        f"rounds for {SMALL_CHANGE:.0%}": [_rounds(r) for r in cells["rounds_for_5pct"]],
        "interval covers": [_text(v) for v in cells["covers"]],
        "why not decided": [_text(v) for v in cells["reason"]],
        "status": [_status(a, b) for a, b in
                   zip(cells["baseline_status"], cells["new_status"], strict=True)],
    })


def _rounds(rounds) -> str:
    """The rounds a 5% change needs: more than MOST_ROUNDS where its spread is known but
    too large, empty where unknown (one process a side, or not compared)."""
    if pd.isna(rounds):
        return ""
    return f">{detectable.MOST_ROUNDS}" if math.isinf(rounds) else str(int(rounds))


def _text(value) -> str:
    return value if isinstance(value, str) else ""


def _p(value: float) -> str:
    return "" if pd.isna(value) else "<0.001" if value < 0.001 else f"{value:.3f}"


def _status(a: str, b: str) -> str:
    return "ok" if a == b == "ok" else f"{a} → {b}"
