"""Efficiency against the machine's limit: what each timed cell computes (dlbench.measure.flops),
the FLOP/s it achieved, and the fraction of the measured GEMM peak (dlbench.run.peak) of its
device, precision and thread count: the best library's matrix product, named, with each
framework's own library's rate beside it (`own GEMM`: the product its layers run), so that
a gap between the frameworks that is a gap between their libraries shows. A library
measured on a busy machine is no ceiling (dlbench.run.peak). A cell above the peak or
above its own
framework's product is a measurement problem (`above_ceiling`): flagged, left out of the
averages here and of the answer (dlbench.analysis.headline), as a wrong answer is.

A cell's FLOPs are those of one timed iteration, as its scenario counts them
(`Scenario.iteration_flops`, from dlbench.measure.flops): a forward pass (inference), a
training step of the CNN (training: 3 × the forward pass of its batch) or of a transformer
with its language-model head (train_step), a whole generation (its prefill and every
decoding step with the growing cache). A scenario that times phases of its iteration apart
(`Scenario.flops_phases`: the generation's prefill and decoding step) has their rates
too. Achieved FLOP/s = FLOPs / the headline time (the median; for training the wall time
per step: dlbench.analysis.summary.headline). Cells measured under a profiler are left out
(their times are not comparable). A cell above the peak is a
measurement problem (the time, the FLOP count or the peak is wrong), flagged with its
numbers: a limit that a cell beats is not a limit.
"""

import json
from collections.abc import Iterable
from pathlib import Path

import numpy as np
import pandas as pd

from dlbench import scenarios
from dlbench.analysis.summary import axes
from dlbench.catalogue import frameworks, recipes
from dlbench.catalogue.axes import FRAMEWORKS
from dlbench.format import fmt_ms, fmt_percent, framework_name, md_text, na, sentence

PEAK_KEYS = ["device", "precision", "threads"]
_GEMM = [f"gemm_{framework}" for framework in FRAMEWORKS]
# Every library's rate, for the recipes whose layers run another than their framework's
# default (Recipe.gemm_library: PyTorch's onednn).
_LIBRARY = [f"library_{library.key}" for framework in FRAMEWORKS
            for library in frameworks.get(framework).gemm_libraries]
_PEAK_COLUMNS = PEAK_KEYS + ["status", "reason", "peak_gflops", "peak_library",
                             "peak_hardware", "theoretical_gflops", "theoretical_label",
                             *_GEMM, *_LIBRARY]
# Above this share of the peak a cell is flagged: the measurement is wrong somewhere.
ABOVE_PEAK = 1.0


def load_peaks(paths: Iterable[str | Path]) -> pd.DataFrame:
    """One row per peak file: device, precision, threads, status, reason, peak_gflops
    (NaN unless ok), peak_library (the best library's name), peak_hardware (the hardware
    fingerprint it was measured on), the theoretical figure and its label, and
    gemm_<framework>: the rate of each framework's own library, the product its layers
    run (NaN where it was not measured, or measured on a busy machine)."""
    rows = []
    for path in paths:
        record = json.loads(Path(path).read_text())
        about = record.get("theoretical") or {}
        own = record.get("framework_gemm") or {}
        rows.append({**{key: record[key] for key in PEAK_KEYS + ["status", "reason"]},
                     "peak_gflops": record.get("gflops", np.nan),
                     "peak_library": record.get("library_name") or record.get("library"),
                     "peak_hardware": (record.get("environment") or {}).get(
                         "hardware_fingerprint"),
                     "theoretical_gflops": about.get("gflops") or np.nan,
                     "theoretical_label": about.get("label", "unknown"),
                     **{f"gemm_{fw}": (own.get(fw) or {}).get("gflops", np.nan)
                        for fw in FRAMEWORKS},
                     **{f"library_{key}": measured.get("gflops", np.nan)
                        for key, measured in (record.get("libraries") or {}).items()
                        if measured.get("status") == "ok"}})
    return pd.DataFrame(rows, columns=_PEAK_COLUMNS).astype(
        {column: float for column in ["peak_gflops", "theoretical_gflops", *_GEMM, *_LIBRARY]})


def libraries(paths: Iterable[str | Path]) -> pd.DataFrame:
    """Every library of every peak file, best first within a peak: device, precision,
    threads, library, whose default it is, GFLOP/s (the best batch), median GFLOP/s,
    size, and the peak's theoretical figure as a last row (or why it is unknown)."""
    rows = []
    for path in paths:
        record = json.loads(Path(path).read_text())
        keys = {key: record[key] for key in PEAK_KEYS}
        found = sorted((record.get("libraries") or _one_library(record)).values(),
                       key=lambda r: -r.get("gflops", -1))
        for lib in found:
            ok = lib["status"] == "ok"
            rows.append({**keys, "library": lib.get("name", lib["library"]),
                         "default of": framework_name(lib["framework"])
                         if lib.get("default") else "",
                         "GFLOP/s": fmt_ms(lib["gflops"]) if ok
                         else na(lib["status"], lib["reason"]),
                         "median GFLOP/s": fmt_ms(lib["median_gflops"]) if ok else "",
                         "size": f"{lib['size']}²" if ok else "",
                         "peak": "✓ best" if ok and lib["gflops"] == record.get("gflops")
                         else ""})
        about = record.get("theoretical") or {}
        rows.append({**keys, "library": "theoretical (" + about.get("label", "unknown") + ")",
                     "default of": "", "GFLOP/s": fmt_ms(about["gflops"])
                     if about.get("gflops") else "unknown", "median GFLOP/s": "",
                     "size": "", "peak": ""})
    return pd.DataFrame(rows)


def _one_library(record: dict) -> dict:
    """An older peak record, of torch.matmul alone (its median), as a library record."""
    if "gflops" not in record:
        return {}
    return {"torch-matmul": {
        "library": "torch-matmul", "name": "torch.matmul (an older record: PyTorch only)",
        "framework": "pytorch", "default": True, "status": record["status"],
        "reason": record["reason"], "gflops": record["gflops"],
        "median_gflops": record["gflops"], "size": record.get("size", "?")}}


def theory(paths: Iterable[str | Path]) -> list[str]:
    """Per peak file, a warning where a library ran on a busy machine (fewer cores than
    its threads), and how its theoretical figure was made (formula and assumptions), or
    why it is unknown, and whether a library measured above it."""
    lines = []
    for path in paths:
        record = json.loads(Path(path).read_text())
        about = record.get("theoretical") or {}
        name = md_text(f"{record['device']} {record['precision']} ×{record['threads']} threads")
        busy = record.get("busy_libraries")
        if busy:
            lines.append(f"**⚠ Measured on a busy machine ({name}): {md_text(', '.join(busy))} got "
                         "fewer cores than its threads**: those figures are low, and the "
                         "peak with them; measure it again on a quiet machine (delete "
                         "`results/peak/`).")
        if not about.get("gflops"):
            lines.append(f"Theoretical peak, {name}: unknown "
                         f"({md_text(about.get('reason', 'not recorded'))}).")
            continue
        lines.append(f"Theoretical peak, {name}: {about['gflops']:,.1f} GFLOP/s "
                     f"{md_text(about['label'])} = {md_text(about['formula'])}. Assumptions: "
                     + md_text("; ".join(about["assumptions"])) + "."
                     + (f" **{md_text(sentence(about['measured_above']))}.**"
                        if about.get("measured_above") else ""))
    return lines


def _sizes(row) -> dict[str, int]:
    """The cell's sizes: its scenario's axes that are numbers in the row."""
    sizes = {}
    for axis in axes(row["scenario"]):
        value = row.get(axis, np.nan)
        if isinstance(value, (int, float, np.integer, np.floating)) and not pd.isna(value):
            sizes[axis] = int(value)
    return sizes


def _iteration_flops(row) -> float:
    """FLOPs of the cell's timed iteration, as its scenario counts them (NaN: none)."""
    scenario = scenarios.scenarios().get(row["scenario"])
    counted = None if scenario is None else scenario.iteration_flops(row["model"], _sizes(row))
    return np.nan if counted is None else counted


def _own_gemm(row) -> float:
    """The rate of the product the cell's linear layers run: its recipe's library where it
    names one (PyTorch's onednn: oneDNN's), else its framework's default library."""
    try:
        library = recipes.optimization(row["scenario"], row["optimization"],
                                       row["framework"]).recipe.gemm_library
    except KeyError:  # a name this dlbench does not declare (an older record's)
        library = None
    column = f"library_{library}" if library else f"gemm_{row['framework']}"
    return row.get(column, np.nan)


def efficiency(frame: pd.DataFrame, peaks: pd.DataFrame) -> pd.DataFrame:
    """The timed cells of the scenarios with FLOP counts, with `flops` (per timed
    iteration), `achieved_gflops`, `threads` (the intra-op threads the cell used), the
    matching peak's `peak_status`, `peak_reason`, `peak_gflops` and `peak_hardware`, and
    `fraction_of_peak` (NaN without an ok peak). Cells whose model has no FLOP count are
    left out."""
    cells = frame[frame["timed"] & ~frame["profiled"]]
    cells = cells.copy()
    cells["flops"] = [_iteration_flops(row) for _, row in cells.iterrows()]
    cells = cells[cells["flops"].notna()]
    cells["achieved_gflops"] = cells["flops"] / (cells["headline_ms"] / 1e3) / 1e9
    threads = cells["intra_op_threads"] if "intra_op_threads" in cells else np.nan
    cells["threads"] = pd.to_numeric(pd.Series(threads, index=cells.index), errors="coerce")
    matched = peaks.rename(columns={"status": "peak_status", "reason": "peak_reason"})
    matched = matched.drop_duplicates(PEAK_KEYS, keep="last").astype({"threads": float})
    cells = cells.reset_index().merge(matched, how="left", on=PEAK_KEYS).set_index("index")
    # One block per dtype again: the summary's hundreds of columns, each added alone, left
    # pandas a frame so fragmented that it printed a PerformanceWarning into the report.
    cells = cells.copy()
    cells.index.name = None
    cells["fraction_of_peak"] = cells["achieved_gflops"] / cells["peak_gflops"]
    own = [_own_gemm(row) for _, row in cells.iterrows()]
    cells["own_gemm_gflops"] = pd.Series(own, index=cells.index, dtype=float)
    cells["fraction_of_own_gemm"] = cells["achieved_gflops"] / cells["own_gemm_gflops"]
    # (A cell exactly at its ceiling is not above it, whatever the rounding.)
    cells["above_peak"] = cells["fraction_of_peak"] > ABOVE_PEAK + 1e-9
    cells["above_own_gemm"] = cells["fraction_of_own_gemm"] > ABOVE_PEAK + 1e-9
    cells["above_ceiling"] = cells["above_peak"] | cells["above_own_gemm"]
    return cells


def with_ceilings(frame: pd.DataFrame, paths: Iterable[str | Path]) -> pd.DataFrame:
    """The summary with `above_ceiling`: True for a timed cell faster than the machine's
    peak or than its own framework's fastest matrix product — a measurement problem, which
    never wins, as a wrong answer never does (dlbench.analysis.headline)."""
    above = efficiency(frame, load_peaks(paths))["above_ceiling"] if len(frame) else None
    flagged = pd.Series(False, index=frame.index)
    if above is not None:
        flagged.loc[above[above].index] = True
    return frame.assign(above_ceiling=flagged)


def phases(cells: pd.DataFrame) -> pd.DataFrame:
    """Per cell of `efficiency` whose scenario times phases of its iteration apart (the
    generation's prefill and decoding step), one row per phase: its FLOPs, its median time,
    the rate it achieved and its share of the cell's peak (✗: a wrong answer). A decoding
    step is one token per row against the cache: little work on every weight, so its
    share of a matrix product's peak is small (bound by memory, not arithmetic)."""
    rows = []
    for _, row in cells.iterrows():
        scenario = scenarios.scenarios().get(row["scenario"])
        if scenario is None:
            continue
        for name, work, column in scenario.flops_phases(row["model"], _sizes(row)):
            ms = row.get(column, np.nan)
            if pd.isna(ms) or ms <= 0:
                continue
            rate = work / (ms / 1e3) / 1e9
            mark = " ✗" if row["wrong_answer"] else ""
            rows.append({"scenario": row["scenario"], "model": row["model"],
                         "batch": int(row["batch"]),
                         "length": "" if pd.isna(row.get("seqlen", np.nan))
                         else int(row["seqlen"]),
                         "framework": framework_name(row["framework"]),
                         "optimization": row["optimization"], "phase": name,
                         "GFLOP": fmt_ms(work / 1e9), "median ms": fmt_ms(ms),
                         "achieved GFLOP/s": fmt_ms(rate) + mark,
                         "% of peak": fmt_share(rate / row["peak_gflops"])
                         if pd.notna(row.get("peak_gflops", np.nan)) else "N/A",
                         "gflops": rate})
    return pd.DataFrame(rows)


def count_above_peak(frame: pd.DataFrame, paths: Iterable[str | Path]) -> int:
    """How many timed cells of a summary are above their peak or their own framework's
    matrix product (the answer's count)."""
    return int(efficiency(frame, load_peaks(paths))["above_ceiling"].sum())


def above_peak(cells: pd.DataFrame) -> pd.DataFrame:
    """The cells of `efficiency` above the peak or their own framework's matrix product —
    a measurement problem — with their numbers: scenario, model, sizes, framework,
    optimization, precision, GFLOP per iteration, ms (the headline time), achieved
    GFLOP/s, the peak and its library, and the shares of both."""
    rows = []
    for _, row in cells[cells["above_ceiling"]].iterrows():
        rows.append({"scenario": row["scenario"], "model": row["model"],
                     "batch": int(row["batch"]),
                     "length": "" if pd.isna(row.get("seqlen", np.nan))
                     else int(row["seqlen"]),
                     "framework": framework_name(row["framework"]),
                     "optimization": row["optimization"], "precision": row["precision"],
                     "GFLOP / iteration": fmt_ms(row["flops"] / 1e9),
                     "ms": fmt_ms(row["headline_ms"]),
                     "achieved GFLOP/s": fmt_ms(row["achieved_gflops"]),
                     "peak GFLOP/s": f"{fmt_ms(row['peak_gflops'])} ({row['peak_library']})",
                     "% of peak": fmt_share(row["fraction_of_peak"]),
                     "own GEMM GFLOP/s": fmt_ms(row["own_gemm_gflops"]),
                     "% of own GEMM": fmt_share(row["fraction_of_own_gemm"])})
    return pd.DataFrame(rows)


def table(cells: pd.DataFrame, several_devices: bool) -> pd.DataFrame:
    """One row per cell of `efficiency`: scenario, model, batch, length and the
    scenario's other settings (data set, pipeline, optimizer; where any cell has them),
    framework, optimization, precision (and device), GFLOP per iteration, ms (the headline
    time: the median, training's wall time per step),
    achieved GFLOP/s, the peak (or N/A with its reason) and the % of it (⚠ above it: a
    measurement problem), the rate of the framework's own default library and the % of
    that; ✗ after the achieved rate marks a wrong answer."""
    order = ["scenario", "model", "batch", "seqlen", "framework", "optimization", "device"]
    rows = []
    for _, row in cells.sort_values([c for c in order if c in cells]).iterrows():
        out = {"scenario": row["scenario"], "model": row["model"], "batch": int(row["batch"]),
               "length": "" if pd.isna(row.get("seqlen", np.nan)) else int(row["seqlen"]),
               "framework": framework_name(row["framework"]),
               "optimization": row["optimization"], "precision": row["precision"]}
        out["settings"] = ", ".join(_setting(a, row[a]) for a in axes(row["scenario"])
                                    if a not in ("batch", "seqlen") and pd.notna(row.get(a)))
        if several_devices:
            out["device"] = row["device"]
        mark = " ✗" if row["wrong_answer"] else ""
        out.update({"GFLOP / iteration": fmt_ms(row["flops"] / 1e9),
                    "ms": fmt_ms(row["headline_ms"]),
                    "achieved GFLOP/s": fmt_ms(row["achieved_gflops"]) + mark,
                    "peak GFLOP/s": _peak_text(row),
                    "% of peak": fmt_share(row["fraction_of_peak"])
                    + (" ⚠ above the peak" if row["above_peak"] else ""),
                    "own GEMM GFLOP/s": fmt_ms(row["own_gemm_gflops"]),
                    "% of own GEMM": fmt_share(row["fraction_of_own_gemm"])
                    + (" ⚠ above it" if row["above_own_gemm"] else "")})
        rows.append(out)
    frame = pd.DataFrame(rows)
    for column in ("length", "settings"):  # only where some cell has one
        if not frame.empty and not frame[column].astype(str).str.len().any():
            frame = frame.drop(columns=column)
    return frame


def fmt_share(value: float) -> str:
    """A share of the peak: '12.3%', and small ones with two significant digits ('0.012%',
    not '0.0%'); '' for NaN."""
    if pd.isna(value) or value >= 0.01:
        return fmt_percent(value)
    return f"{value * 100:.2g}%"


def _setting(axis: str, value) -> str:
    """'new_tokens 32', 'dataset digits': named, a whole number without '.0' (a size axis
    that another scenario lacks is stored as a float)."""
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return f"{axis} {value}"


def _peak_text(row) -> str:
    if pd.notna(row["peak_gflops"]):
        return fmt_ms(row["peak_gflops"])
    if pd.isna(row["peak_status"]):
        return "N/A (not measured)"
    return na(row["peak_status"], row["peak_reason"])


def by_optimization(cells: pd.DataFrame, several_devices: bool) -> pd.DataFrame:
    """Per scenario, framework, optimization and precision (and device): the cells, the
    median and the best % of the peak, and the best achieved GFLOP/s, over the cells with
    a right answer and below their ceilings (a rate that came with a wrong answer, or one
    above a limit, does not count)."""
    keys = ["scenario", "framework", "optimization", "precision"] + (
        ["device"] if several_devices else [])
    above = cells["above_ceiling"] if "above_ceiling" in cells else False
    grouped = cells[~cells["wrong_answer"] & ~above].groupby(keys, sort=True, dropna=False)
    frame = grouped.agg(cells=("flops", "size"),
                        median_fraction=("fraction_of_peak", "median"),
                        best_fraction=("fraction_of_peak", "max"),
                        best_gflops=("achieved_gflops", "max")).reset_index()
    frame["framework"] = frame["framework"].map(framework_name)
    for column in ("median_fraction", "best_fraction"):
        frame[column] = frame[column].map(fmt_share)
    frame["best_gflops"] = frame["best_gflops"].map(fmt_ms)
    return frame.rename(columns={"median_fraction": "median % of peak",
                                 "best_fraction": "best % of peak",
                                 "best_gflops": "best GFLOP/s"})


def other_hardware(cells: pd.DataFrame) -> int:
    """How many cells were matched to a peak measured on other hardware (another hardware
    fingerprint): their fractions compare two machines."""
    if "env_hardware_fingerprint" not in cells:
        return 0
    known = cells["peak_hardware"].notna() & cells["env_hardware_fingerprint"].notna()
    return int((known & cells["peak_hardware"].ne(cells["env_hardware_fingerprint"])).sum())
