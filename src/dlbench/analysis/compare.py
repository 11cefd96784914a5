"""Two result sets, cell by cell: what got slower, what got faster, what is inside the noise.

For every cell that both sets hold and that is ok (timed) in both: the baseline's and the
new set's median, their ratio new/baseline with its 95% interval (from the two medians'
intervals, `dlbench.analysis.uncertainty`), and a two-sided Mann-Whitney U test of the two
sets' samples. The timing is the host-timed one (`median_ms`, every report's headline); the
samples are the per-iteration timings of the timed loop; where either set measured the
cell in several processes (repeats), the test is on the processes' medians instead, as
samples of one process are not independent draws across processes (a set measured in one
process counts its median once). With few samples the test cannot reach significance (3
against 3, processes or iterations: its smallest p is 0.1): measure 4 or more a side.

The verdict is a *regression* (ratio above 1) or an *improvement* (below 1) only if the
change is significant both ways: p < 0.05 AND the ratio's interval excludes 1; anything
else is *not significant*. Where a set is a summary file (no samples), there is no test
and the interval alone decides. Cells not ok in either set are *not compared* and keep
their statuses; cells of one set only are listed apart.
"""

from dataclasses import dataclass

import numpy as np
import pandas as pd

from dlbench.analysis import uncertainty
from dlbench.analysis.environment import FIELDS, fields, precision_settings
from dlbench.report.format import count, fmt_fixed, fmt_ms, fmt_percent
from dlbench.resultset import ResultSet

ALPHA = 0.05
REGRESSION, IMPROVEMENT = "regression", "improvement"
NOT_SIGNIFICANT, NOT_COMPARED = "not significant", "not compared"
ORDER = (REGRESSION, IMPROVEMENT, NOT_SIGNIFICANT, NOT_COMPARED)
_TIMING = {"median_ms": "ms", "median_ci95_ms_low": "low", "median_ci95_ms_high": "high"}


@dataclass
class Comparison:
    """cells: one row per cell of both sets, regressions first, each group by the size of
    its change; only_baseline, only_new: cell_id and status of the cells of one set;
    environment: field, baseline, new — the fingerprint differences that matter."""

    baseline: str
    new: str
    cells: pd.DataFrame
    only_baseline: pd.DataFrame
    only_new: pd.DataFrame
    environment: pd.DataFrame

    def count(self, verdict: str) -> int:
        return int(self.cells["verdict"].eq(verdict).sum())

    def headline(self) -> str:
        """'4 cells in both sets: 1 regression, 0 improvements, 2 not significant, 1 not
        compared (not ok in a set)'."""
        return (f"{count(len(self.cells), 'cell')} in both sets: "
                f"{count(self.count(REGRESSION), 'regression')}, "
                f"{count(self.count(IMPROVEMENT), 'improvement')}, "
                f"{self.count(NOT_SIGNIFICANT)} not significant, "
                f"{self.count(NOT_COMPARED)} not compared (not ok in a set)")


def compare(baseline: ResultSet, new: ResultSet) -> Comparison:
    a, b = baseline.summary.set_index("cell_id"), new.summary.set_index("cell_id")
    common = [cell for cell in a.index if cell in b.index]
    rows = [_row(cell, a.loc[cell], b.loc[cell], _samples(baseline, new, cell))
            for cell in common]
    cells = pd.DataFrame(rows, columns=_COLUMNS)
    rank = cells["verdict"].map(ORDER.index)
    size = -np.abs(np.log(cells["ratio"].astype(float)))
    cells = cells.assign(_rank=rank, _size=size.fillna(0)).sort_values(
        ["_rank", "_size", "cell_id"]).drop(columns=["_rank", "_size"]).reset_index(drop=True)
    return Comparison(baseline.name, new.name, cells, _alone(a, b), _alone(b, a),
                      differences(baseline.summary, new.summary))


_COLUMNS = ["cell_id", "baseline_status", "new_status", "baseline_ms", "baseline_low",
            "baseline_high", "new_ms", "new_low", "new_high", "ratio", "ratio_low",
            "ratio_high", "p_value", "test", "verdict"]


def _samples(baseline: ResultSet, new: ResultSet, cell: str) -> tuple[list, list, str]:
    """The two samples to test and what they are."""
    if cell in baseline.processes or cell in new.processes:
        return _per_process(baseline, cell), _per_process(new, cell), "process medians"
    return baseline.samples.get(cell, []), new.samples.get(cell, []), "iterations"


def _per_process(results: ResultSet, cell: str) -> list[float]:
    """The medians of the cell's processes; one process: its samples' median."""
    if cell in results.processes:
        return results.processes[cell]
    return [float(np.median(results.samples[cell]))] if cell in results.samples else []


def _row(cell: str, a: pd.Series, b: pd.Series, samples: tuple[list, list, str]) -> dict:
    row = {"cell_id": cell, "baseline_status": a["status"], "new_status": b["status"]}
    for side, values in (("baseline", a), ("new", b)):
        row.update({f"{side}_{name}": values[column] for column, name in _TIMING.items()})
    if not (a["timed"] and b["timed"]):
        return {**row, "verdict": NOT_COMPARED}
    ratio, low, high = uncertainty.ratio_interval(
        row["new_ms"], row["new_low"], row["new_high"],
        row["baseline_ms"], row["baseline_low"], row["baseline_high"])
    p_value, test = mann_whitney(*samples)
    return {**row, "ratio": ratio, "ratio_low": low, "ratio_high": high, "p_value": p_value,
            "test": test, "verdict": verdict(low, high, p_value)}


def mann_whitney(a: list[float], b: list[float], kind: str) -> tuple[float, str]:
    """The two-sided Mann-Whitney U test's p-value of two samples and a description of
    the test ('iterations 40/40'); NaN and 'none (…)' where a side has no samples."""
    from scipy.stats import mannwhitneyu

    if not len(a) or not len(b):
        return np.nan, "none (a summary has no samples)"
    p_value = float(mannwhitneyu(b, a, alternative="two-sided").pvalue)
    return p_value, f"{kind} {len(a)}/{len(b)}"


def verdict(low: float, high: float, p_value: float) -> str:
    """Regression or improvement only if p < ALPHA and the ratio's interval [low, high]
    excludes 1 (without a p-value — no samples — the interval alone decides)."""
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
    for label in (f.label for f in FIELDS if f.matters):
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
        "baseline (ms)": [fmt_ms(v) for v in cells["baseline_ms"]],
        "new (ms)": [fmt_ms(v) for v in cells["new_ms"]],
        "change": [("+" if v > 0 else "") + fmt_percent(v) if pd.notna(v) else ""
                   for v in change],
        "new/baseline": [fmt_fixed(v, 3) for v in cells["ratio"]],
        "95% interval": [interval(lo, hi) for lo, hi in
                         zip(cells["ratio_low"], cells["ratio_high"], strict=True)],
        "p": [_p(v) for v in cells["p_value"]],
        "status": [_status(a, b) for a, b in
                   zip(cells["baseline_status"], cells["new_status"], strict=True)],
    })


def _p(value: float) -> str:
    return "" if pd.isna(value) else "<0.001" if value < 0.001 else f"{value:.3f}"


def _status(a: str, b: str) -> str:
    return "ok" if a == b == "ok" else f"{a} → {b}"
