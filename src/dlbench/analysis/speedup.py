"""Speed-up of each optimization over its framework's eager: per cell (heatmap panels) and
per optimization (the overview beside compile time and correctness)."""

from dataclasses import dataclass

import numpy as np
import pandas as pd

from dlbench.analysis import rounds, uncertainty
from dlbench.analysis.status import not_applicable
from dlbench.format import fmt_error, fmt_s, framework_name, framework_rank, na

# Colour scales reach at least this far from 1 (a 1.5× speed-up or slow-down).
MIN_SCALE = 1.5


@dataclass
class Panel:
    """The speed-ups of one framework, optimization and device: rows (model, batch), columns
    sequence lengths; `wrong`, `timed` and `tied` are the same shape (wrong answer; has a
    timing; its speed-up is inside the noise: `ties`)."""

    framework: str
    optimization: str
    device: str
    speedup: pd.DataFrame
    wrong: pd.DataFrame
    timed: pd.DataFrame
    tied: pd.DataFrame


def geomean(values: pd.Series) -> float:
    """The geometric mean of the values that are not NaN; NaN if there are none."""
    values = values.dropna().astype(float)
    return float(np.exp(np.log(values).mean())) if len(values) else np.nan


def with_speedup(frame: pd.DataFrame) -> pd.DataFrame:
    """The timed cells of an optimization other than eager that have an eager baseline."""
    return frame[frame["timed"] & frame["optimization"].ne("eager") & frame["speedup"].notna()]


def scale(frame: pd.DataFrame) -> float:
    """The half-width in log2 of a colour scale centred on 1 that holds every speed-up."""
    logs = np.log2(with_speedup(frame)["speedup"].astype(float))
    return max(float(np.nanmax(np.abs(logs))), np.log2(MIN_SCALE))


def _grid(cells: pd.DataFrame, values: str, index: pd.MultiIndex, columns: list,
          **options) -> pd.DataFrame:
    """One value per (model, batch) and sequence length, on the given rows and columns."""
    table = cells.pivot_table(index=["model", "batch"], columns="seqlen", values=values,
                              aggfunc="first", **options)
    return table.reindex(index=index, columns=columns)


def ties(frame: pd.DataFrame, spreads: dict | None = None) -> pd.Series:
    """Whether each cell's speed-up over its eager baseline is a tie: its 95% interval holds
    1 — paired round by round where both cells were measured in rounds, with the scenario's
    spread between processes (`spreads`: dlbench.analysis.rounds.run_spreads of the whole
    run's timed cells, as the answer pools them; else of `frame`'s), else from the two
    times' intervals. False for a cell without a speed-up."""
    tied = pd.Series(False, index=frame.index)
    cells = with_speedup(frame)
    if cells.empty:
        return tied
    if spreads is None:
        spreads = rounds.run_spreads(frame[frame["timed"]])
    eager = frame.drop_duplicates("cell_id").set_index("cell_id", drop=False)
    for index, cell in cells.iterrows():
        if cell["eager_cell"] not in eager.index:
            continue
        _, low, high, _ = rounds.ratio_of(eager.loc[cell["eager_cell"]], cell,
                                          spreads.get(cell["scenario"]))
        tied[index] = uncertainty.verdict(low, high, "faster", "slower") == uncertainty.TIE
    return tied


def panels(frame: pd.DataFrame, spreads: dict | None = None) -> list[Panel]:
    """One panel per framework, optimization and device with at least one speed-up; every
    cell of it is in the panel, so that a cell that did not run is N/A; its ties judged
    with `spreads` (`ties`)."""
    keys = with_speedup(frame).groupby(["framework", "optimization", "device"], sort=True).groups
    frame = frame.assign(tie=ties(frame, spreads))
    result = []
    for framework, optimization, device in sorted(keys, key=lambda k: framework_rank(k[0])):
        cells = frame[frame["framework"].eq(framework) & frame["optimization"].eq(optimization)
                      & frame["device"].eq(device)]
        index = pd.MultiIndex.from_frame(cells[["model", "batch"]].drop_duplicates()
                                         .sort_values(["model", "batch"]))
        columns = sorted(cells["seqlen"].unique())
        speedup = _grid(cells, "speedup", index, columns, dropna=False).astype(float)
        wrong = _grid(cells, "wrong_answer", index, columns).fillna(False).astype(bool)
        ran = cells.assign(ran=cells["status"].eq("ok"))
        timed = _grid(ran, "ran", index, columns).fillna(False).astype(bool)
        tied = _grid(cells, "tie", index, columns).fillna(False).astype(bool)
        result.append(Panel(framework, optimization, device, speedup, wrong, timed, tied))
    return result


def verdict(cells: pd.DataFrame) -> str:
    """'✓ all n within tolerance', '✗ k of n outside tolerance' or 'not checked'."""
    checked = cells[cells["checked"]]
    if checked.empty:
        return "not checked"
    wrong = int(checked["wrong_answer"].sum())
    if wrong:
        return f"✗ {wrong} of {len(checked)} outside tolerance"
    return f"✓ all {len(checked)} within tolerance"


ABOVE = "above a ceiling, left out"


def above_ceiling(frame: pd.DataFrame) -> pd.Series:
    """The cells timed above the machine's peak or their framework's own matrix product
    (`above_ceiling`, dlbench.analysis.efficiency.with_ceilings), or whose eager baseline
    was (`eager_cell`, dlbench.analysis.summary.derive: the speed-up would divide by an
    impossible time); False where not known."""
    if "above_ceiling" not in frame:
        return pd.Series(False, index=frame.index)
    own = frame["above_ceiling"].fillna(False).astype(bool)
    if "eager_cell" not in frame:
        return own
    return own | frame["eager_cell"].isin(set(frame.loc[own, "cell_id"]))


def valid_speedup(frame: pd.DataFrame) -> pd.Series:
    """Whether each cell's speed-up counts: timed, with an eager baseline, a right (or
    unchecked) answer and a time below its ceilings. A speed-up that came with a wrong
    answer, or faster than the machine can be, does not count."""
    return (frame["timed"] & frame["speedup"].notna() & ~frame["wrong_answer"]
            & ~above_ceiling(frame))


@dataclass
class Overview:
    """table: one row per framework, optimization (and device); other_framework: the
    combinations left out as N/A by design; common: per device, the (model, batch,
    seqlen) cells the averages are over; left_out: the cells left out of them, with the
    optimizations that had no valid speed-up there."""

    table: pd.DataFrame
    other_framework: int
    common: dict[str, list[tuple]]
    left_out: pd.DataFrame


SIZES = ["model", "batch", "seqlen"]


def common_cells(frame: pd.DataFrame) -> tuple[dict[str, set], pd.DataFrame]:
    """Per device, the cells (model, batch, seqlen) where every compared optimization (each
    one other than eager with at least one valid speed-up on that device) has a valid
    speed-up; and the cells left out, with the optimizations missing there."""
    valid = frame[valid_speedup(frame) & frame["optimization"].ne("eager")]
    common, left = {}, []
    for device, cells in valid.groupby("device"):
        compared = cells.groupby(["framework", "optimization"])
        have = {key: set(map(tuple, group[SIZES].to_numpy())) for key, group in compared}
        every = set.union(*have.values())
        common[device] = set.intersection(*have.values())
        for size in sorted(every - common[device]):
            missing = [f"{framework_name(f)} {o}" for (f, o), s in have.items() if size not in s]
            left.append({"device": device, **dict(zip(SIZES, size, strict=True)),
                         "missing": ", ".join(missing)})
    return common, pd.DataFrame(left, columns=["device", *SIZES, "missing"])


def overview(frame: pd.DataFrame, several_devices: bool) -> Overview:
    """One row per framework, optimization (and device): cells timed, the geometric-mean
    speed-up over eager with its range over the cells that every compared optimization
    measured with a right answer (dlbench.analysis.speedup.common_cells), how many of its
    cells were excluded for a wrong answer, median compile time, largest error and
    verdict; N/A with the reason where no cell ran."""
    rows, other_framework = [], 0
    common, left_out = common_cells(frame)
    groups = frame.dropna(subset=["framework"]).groupby(["framework", "optimization", "device"],
                                                        sort=True)
    for (framework, optimization, device), cells in sorted(  # the registry's order
            groups, key=lambda group: framework_rank(group[0][0])):
        timed = cells[cells["timed"]]
        if timed.empty and not_applicable(cells).all():
            other_framework += 1
            continue
        row = {"framework": framework_name(framework), "optimization": optimization}
        if several_devices:
            row["device"] = device
        if timed.empty:
            status, reason = cells[["status", "reason"]].fillna("").iloc[0]
            row.update({"cells": f"0 of {len(cells)}",
                        "speed-up over eager": na(status, reason, width=70)})
            rows.append(row)
            continue
        wrong = int((timed["wrong_answer"] & timed["speedup"].notna()).sum())
        above = int((above_ceiling(timed) & ~timed["wrong_answer"]
                     & timed["speedup"].notna()).sum())
        shared = common.get(device, set())
        in_common = pd.Series([tuple(size) in shared for size in timed[SIZES].to_numpy()],
                              index=timed.index, dtype=bool)
        counted = timed[valid_speedup(timed) & in_common]
        ratios = counted["speedup"]
        if optimization == "eager":
            speedup = "1 (the baseline)"
        elif ratios.empty and not valid_speedup(timed).any():
            speedup = ("— (every speed-up came with a wrong answer)" if wrong and not above
                       else "— (every speed-up was above a ceiling or wrong)" if above
                       else "— (no eager baseline)")
        elif ratios.empty:
            speedup = "— (no cell that every optimization measured)"
        else:
            speedup = f"{geomean(ratios):.2f}× (range {ratios.min():.2f}–{ratios.max():.2f})"
        row.update({
            "cells": f"{len(timed)} of {len(cells)}",
            "speed-up over eager": speedup,
            "averaged over": "" if optimization == "eager" else f"{len(ratios)} cells",
            "wrong answers left out": wrong,
            ABOVE: above,
            "compile time (s)": fmt_s(timed["compile_s"].median()),
            "max rel error": fmt_error(timed["correctness_max_rel_error"].max()),
            "tolerance": fmt_error(timed["correctness_tolerance"].max()),
            "correctness": verdict(timed),
        })
        rows.append(row)
    table = pd.DataFrame(rows).astype(object).fillna("")  # blanks in numeric columns too
    if ABOVE in table and not table[ABOVE].replace("", 0).astype(int).any():
        table = table.drop(columns=ABOVE)  # said only where a cell was
    if "wrong answers left out" in table:
        table["wrong answers left out"] = table["wrong answers left out"].map(
            lambda n: "" if n == "" else (f"✗ {int(n)}" if n else "0"))
    return Overview(table, other_framework,
                    {device: sorted(cells) for device, cells in common.items()}, left_out)
