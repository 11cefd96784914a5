"""How trustworthy each timing is: spread, confidence interval, load, stolen CPU, flags."""

from dataclasses import dataclass

import numpy as np
import pandas as pd

from dlbench.analysis.flags import flagged
from dlbench.format import fmt_fixed, fmt_ms, fmt_percent

ROWS = 30  # the table shows the flagged cells, or the least stable ones, up to this many
_COLUMNS = {"cell_id": "cell", "median_ms": "median ms", "ci": "95% CI of the median",
            "median_ci95_half_width": "CI ±", "median_ci95_coverage": "CI coverage",
            "relative_iqr": "IQR / median",
            "machine_noise_relative_iqr": "machine's IQR / median", "iterations": "iterations",
            "stopped_by": "stopped by", "attempts": "attempts",
            "utilization_process_cpu_cores_mean": "cores used",
            "utilization_other_load_cores": "other load (cores)",
            "utilization_steal_fraction": "stolen", "between_processes_cv":
            "CV between processes", "flags_reasons": "flag"}
_STOPPED = {"min_duration_and_iterations": "fixed", "target_ci": "target reached",
            "max_duration": "max duration"}


def _within_process(row) -> float:
    rounds = row.get("rounds_relative_iqr")
    if isinstance(rounds, list | tuple | np.ndarray) and len(rounds):
        return float(np.median(np.asarray(rounds, dtype=float)))
    return row["relative_iqr"]


@dataclass
class Quality:
    """table: the flagged cells (or, if none is, every timed cell), least stable first,
    at most ROWS of them; flagged: how many timed cells are flagged; machine_noise: the
    machine's own noise beside the cells (dlbench.measure.noise: the relative IQR of a fixed
    workload), as (lowest, median, highest) over the cells, None where none has it."""

    table: pd.DataFrame
    flagged: int
    machine_noise: tuple[float, float, float] | None = None


def quality(timed: pd.DataFrame) -> Quality | None:
    """The measurement quality of the timed cells; None without cells or spreads."""
    if timed.empty or "relative_iqr" not in timed:
        return None
    missing = pd.Series(np.nan, index=timed.index)
    cells = timed.assign(
        # The spread within a process, as the unstable flag judges it: in rounds, the
        # median of the rounds' (the pooled samples' would count the drift between rounds).
        relative_iqr=[_within_process(row) for _, row in timed.iterrows()],
        flagged=flagged(timed),
        ci=[f"{fmt_ms(lo)} – {fmt_ms(hi)}" for lo, hi in
            zip(timed.get("median_ci95_ms_low", missing),
                timed.get("median_ci95_ms_high", missing), strict=True)],
    )
    columns = {k: v for k, v in _COLUMNS.items() if k in cells}
    bad = cells[cells["flagged"]]
    table = (bad if not bad.empty else cells).sort_values("relative_iqr", ascending=False)
    table = table[list(columns)].rename(columns=columns).head(ROWS)
    for column in ("IQR / median", "machine's IQR / median", "stolen", "CV between processes",
                   "CI ±", "CI coverage"):
        if column in table:
            table[column] = table[column].map(fmt_percent)
    if "stopped by" in table:
        table["stopped by"] = table["stopped by"].map(lambda v: _STOPPED.get(v, "") if
                                                      isinstance(v, str) else "")
    for column in ("cores used", "other load (cores)"):
        if column in table:
            table[column] = table[column].map(fmt_fixed)
    table["median ms"] = table["median ms"].map(fmt_ms)
    # A column blank in every row shown (CI coverage without a simulated check) says
    # nothing and costs the table its fit on the page (with the flags' reasons beside it).
    blank = [c for c in table if table[c].map(lambda v: v is None or v == "" or (
        isinstance(v, float) and np.isnan(v))).all()]
    table = table.drop(columns=[c for c in blank if c not in ("cell", "flag")])
    beside = timed.get("machine_noise_relative_iqr", missing).dropna()
    noise = None if beside.empty else (float(beside.min()), float(beside.median()),
                                       float(beside.max()))
    return Quality(table, len(bad), noise)
