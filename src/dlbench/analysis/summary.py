"""The summary with the columns the analysis derives: precision, timed, checked,
wrong_answer, headline_ms, eager_ms and speedup; tolerant of summaries written before a column
existed."""

from pathlib import Path

import numpy as np
import pandas as pd

from dlbench import scenarios as registry
from dlbench.analysis import memory
from dlbench.analysis.present import kept, ordered, scenario_of
from dlbench.catalogue.recipes import recorded_precision
from dlbench.measure.stats import relative_half_width
from dlbench.records import origin

# An optimization's speed-up is over the eager cell with these same values and the same
# sizes (the scenario's axes).
BASELINE_KEYS = ["scenario", "framework", "model", "device"]
# Columns the analysis reads, and their value where an older summary lacks them.
_NUMBERS = ["median_ms", "prepare_s", "cold_start_s", "compile_s", "correctness_max_abs_error",
            "correctness_max_rel_error", "correctness_tolerance", "median_ci95_ms_low",
            "median_ci95_ms_high", "wall_step_ms", "wall_step_ms_ci95_low",
            "wall_step_ms_ci95_high", "sampled_peak_rss_mb"]
_OTHERS = ["cell_id", "framework", "model", "device", "batch", "seqlen", "optimization",
           "status", "reason", "correctness_within_tolerance", "correctness_precision"]


def load(path: str | Path) -> pd.DataFrame:
    """The summary parquet with the derived columns (see `derive`)."""
    return derive(pd.read_parquet(path))


def derive(summary: pd.DataFrame) -> pd.DataFrame:
    """A copy of the summary with missing columns filled (NaN or NA) and these added:

    scenario      the cell's scenario ('inference' where the summary has none)
    precision     the optimization's precision (recorded, else the recipe registry's)
    timed         status ok with a median: the cell has a timing
    checked       the output was compared with a reference
    wrong_answer  checked, and outside its precision's tolerance (unchecked: not wrong); a
                  training cell is checked by the accuracy match and wrong on a mismatch
    profiled      measured under a profiler (not compared with cells that were not)
    headline_ms   what comparisons rank a cell by (`headline`): its median, or for a
                  scenario that declares "wall" (training) the wall time per step it
                  recorded, with headline_ci95_ms_low and _high, and headline_wall
    eager_ms      the headline of the same cell in its framework's eager, for timed cells
    speedup       eager_ms / headline_ms: above 1, faster than eager

    A cell's host-memory figures are blank where they are not its own (measured after
    other cells in its process: `memory.without_borrowed_memory`).

    In a run with rounds, `flags_spread_between_processes` is judged here, against the
    machine's drift between the rounds (`spread_between_rounds`).

    Cells from another machine or dlbench version than the run's that aggregation left
    out of the comparisons (dlbench.records.origin; `report.mix_foreign`) are not in it: no answer,
    ratio, table or plot compares them (status.from_elsewhere lists them).
    """
    frame = kept(memory.without_borrowed_memory(summary))
    for column in _NUMBERS:
        if column not in frame:
            frame[column] = np.nan
    for column in _OTHERS:
        if column not in frame:
            frame[column] = pd.NA
    frame["scenario"] = scenario_of(frame)
    frame["precision"] = [recorded_precision(s, o, p) for s, o, p in zip(
        frame["scenario"], frame["optimization"],
        frame.get("optimization_precision", frame["optimization"]), strict=True)]
    frame["timed"] = frame["status"].eq("ok") & frame["median_ms"].notna()
    # Measured under a profiler: its timing is not compared with unprofiled cells.
    frame["profiled"] = frame["profile_status"].notna() if "profile_status" in frame \
        else False
    # Training cells are checked by the accuracy match: a mismatch is a wrong answer, as an
    # output outside its tolerance is in inference (dlbench.analysis.training).
    training = frame["scenario"].eq("training")
    frame["accuracy_verdict"] = None  # the accuracy match's word, for every trained cell
    if training.any():
        from dlbench.analysis.training import verdicts

        found = verdicts(frame[training])
        frame.loc[training, "accuracy_verdict"] = found
        frame["correctness_within_tolerance"] = frame["correctness_within_tolerance"].astype(
            object)
        frame.loc[training, "correctness_within_tolerance"] = found.map(
            {"match": True, "mismatch": False}).astype(object)
    frame["checked"] = frame["correctness_within_tolerance"].notna()
    frame["wrong_answer"] = [v is not None and not pd.isna(v) and not bool(v)
                             for v in frame["correctness_within_tolerance"]]
    frame = intervals_from_rounds(frame)
    frame = headline(frame)
    frame = spread_between_rounds(frame)
    # Each timed cell's eager baseline: its time, and which cell it is (eager_cell), so that
    # what disqualifies the baseline (above its ceiling) disqualifies the speed-up too.
    frame["eager_ms"], frame["eager_cell"] = np.nan, None
    for scenario, cells in frame.groupby("scenario"):
        keys = BASELINE_KEYS + [a for a in axes(scenario) if a in cells]
        eager = cells[cells["timed"] & cells["optimization"].eq("eager") & ~cells["profiled"]]
        eager = eager.set_index(keys)[["headline_ms", "cell_id"]]
        eager = eager[~eager.index.duplicated(keep=False)]  # an ambiguous baseline is none
        joined = cells.join(eager.rename(columns={"headline_ms": "baseline",
                                                  "cell_id": "baseline_cell"}), on=keys)
        measured = cells["timed"] & ~cells["profiled"]
        frame.loc[cells.index, "eager_ms"] = joined["baseline"].where(measured)
        frame.loc[cells.index, "eager_cell"] = joined["baseline_cell"].where(measured, None)
    frame["speedup"] = frame["eager_ms"] / frame["headline_ms"]
    return frame


def headline(frame: pd.DataFrame) -> pd.DataFrame:
    """The frame with headline_ms, its 95% interval (headline_ci95_ms_low, _high) and
    headline_wall: the median and its interval, or for a scenario whose headline is "wall"
    (training) the wall time per step that each cell recorded with its interval
    (dlbench.measure.training.wall_step) — for all of the scenario's timed cells or, where
    one lacks it (recorded before it existed), for none, so that no comparison sets one
    figure against the other. Where every timed cell of a scenario was measured in rounds,
    each takes its level instead (headline_level): the geometric mean of its rounds'
    figures (dlbench.analysis.rounds.level), the time its paired ratios compare, with its
    interval moved to it (the same relative width) — again all or none, so that no cell's
    level is ranked against another's pooled figure. Ranked by the pooled median, a cell
    could be named the fastest while the paired ratio said its runner-up was faster (the
    default run of 2026-11-30: 0.96×)."""
    from dlbench.analysis import rounds

    frame = frame.assign(headline_ms=frame["median_ms"],
                         headline_ci95_ms_low=frame["median_ci95_ms_low"],
                         headline_ci95_ms_high=frame["median_ci95_ms_high"],
                         headline_wall=False, headline_level=False)
    wall = ["wall_step_ms", "wall_step_ms_ci95_low", "wall_step_ms_ci95_high"]
    known = registry.scenarios()
    for scenario, cells in frame.groupby("scenario"):
        if scenario not in known or known[scenario].headline != "wall":
            continue
        timed = cells[cells["timed"]]
        if timed.empty or timed[wall].isna().any(axis=None):
            continue
        frame.loc[timed.index, ["headline_ms", "headline_ci95_ms_low",
                                "headline_ci95_ms_high"]] = timed[wall].to_numpy(float)
        frame.loc[timed.index, "headline_wall"] = True
    if "rounds_median_ms" not in frame:
        return frame
    columns = ["headline_ms", "headline_ci95_ms_low", "headline_ci95_ms_high"]
    for _, cells in frame[frame["timed"]].groupby("scenario"):
        levels = {index: rounds.level(row) for index, row in cells.iterrows()}
        if any(level is None for level in levels.values()):
            continue
        for index, level in levels.items():
            frame.loc[index, columns] = frame.loc[index, columns].to_numpy(float) * (
                level / float(frame.loc[index, "headline_ms"]))
            frame.loc[index, "headline_level"] = True
    return frame


def intervals_from_rounds(frame: pd.DataFrame) -> pd.DataFrame:
    """In a run with rounds, each timed cell's interval of its median from the spread
    between processes pooled over its scenario's cells and the drift between rounds
    (dlbench.analysis.rounds.level_interval; the variance shared by the scenarios ranked
    by their median: rounds.run_spreads), in place of the one its own few processes
    give (training's wall time per step keeps its own interval, from its steps and seeds)."""
    from dlbench.analysis import rounds

    if "rounds_median_ms" not in frame:
        return frame
    frame = frame.copy()
    measured = frame["timed"] & ~frame["profiled"]
    spreads = rounds.run_spreads(frame[measured])
    for scenario, cells in frame[measured].groupby("scenario"):
        pooled = spreads.get(scenario)
        if pooled is None:
            continue
        for index, row in cells.iterrows():
            interval = rounds.level_interval(row, pooled)
            if interval is None:
                continue
            low, high = interval
            frame.loc[index, ["median_ci95_ms_low", "median_ci95_ms_high"]] = low, high
            frame.loc[index, "median_ci95_half_width"] = relative_half_width(
                row["median_ms"], low, high)
    return frame


def spread_between_rounds(frame: pd.DataFrame) -> pd.DataFrame:
    """In a run with rounds, each timed cell's spread between its rounds' processes, the
    machine's drift removed (dlbench.analysis.rounds): flagged `spread between processes`
    beyond the limit, with its reason added to the cell's."""
    from dlbench.analysis import rounds

    if "rounds_median_ms" not in frame:
        return frame
    frame = frame.copy()
    for column in ("flags_spread_between_processes", "flags_reasons"):
        if column not in frame:
            frame[column] = False if column.endswith("processes") else ""
    frame["flags_spread_between_processes"] = frame["flags_spread_between_processes"].astype(
        "boolean").fillna(False).astype(bool)
    for _, cells in frame[frame["timed"]].groupby("scenario"):
        reasons = rounds.spread_flags(cells, rounds.spread(cells))
        for index, reason in reasons[reasons.ne("")].items():
            frame.loc[index, "flags_spread_between_processes"] = True
            before = frame.loc[index, "flags_reasons"]
            frame.loc[index, "flags_reasons"] = "; ".join(
                filter(None, [before if isinstance(before, str) else "", reason]))
    return frame


def timed(frame: pd.DataFrame) -> pd.DataFrame:
    """The cells with a timing."""
    return frame[frame["timed"]]


def several_devices(frame: pd.DataFrame) -> bool:
    """Whether the cells ran on more than one device (tables then name the device)."""
    return frame["device"].nunique() > 1


def axes(scenario: str) -> list[str]:
    """The size columns of a scenario (none known for one that is not registered here)."""
    known = registry.scenarios()
    return [axis.name for axis in known[scenario].axes] if scenario in known else []


# What a column is when it is not a parameter of the cell: the outcome, provenance, the
# columns the analysis derives, a result section's prefix, a unit's suffix.
_OUTCOME = {"cell_id", "scenario", "status", "reason", "started_at", "finished_at", "source",
            "intra_op_threads", "inter_op_threads", "iterations", "warmup_iterations",
            "relative_iqr", "timed", "checked", "wrong_answer", "eager_ms", "eager_cell",
            "speedup", "headline_ms", "headline_ci95_ms_low", "headline_ci95_ms_high",
            "headline_wall", "headline_level", "precision", "protocol", "attempts",
            "stopped_by", "target_ci", "profiled", "accuracy_verdict",
            origin.FOREIGN, origin.LEFT_OUT}
_PREFIXES = ("env_", "utilization_", "flags_", "optimization_", "correctness_", "process_",
             "device_time_", "between_processes_", "median_ci95_", "arithmetic_",
             "attention_", "compilation_", "mixed_precision_", "path_", "profile_",
             "breakdown_", "step_", "loss_", "machine_noise_")
_SUFFIXES = ("_ms", "_s", "_mb", "_low", "_high", "_fraction")


def is_measurement(column: str) -> bool:
    """Whether a summary column holds a cell's outcome or measurement (not a parameter)."""
    return (column in _OUTCOME or column.startswith(_PREFIXES)
            or column.endswith(_SUFFIXES))


def scenarios(frame: pd.DataFrame) -> list[str]:
    """The scenarios present: the registered ones in their order, then the others sorted."""
    return ordered(frame["scenario"])


def of_scenario(frame: pd.DataFrame, scenario: str) -> pd.DataFrame:
    """The cells of one scenario. A parameter that another scenario lacks was stored as
    floats (NaN there): it is an integer again where all of this scenario's values are."""
    cells = frame[frame["scenario"].eq(scenario)].copy()
    for column in cells.columns:
        values = cells[column]
        if (not is_measurement(column) and pd.api.types.is_float_dtype(values)
                and values.notna().all() and values.eq(values.round()).all()):
            cells[column] = values.astype("int64")
    return cells


def group_keys(several: bool) -> list[str]:
    """The keys of a per-optimization table: framework, optimization (and device)."""
    return ["framework", "optimization"] + (["device"] if several else [])
