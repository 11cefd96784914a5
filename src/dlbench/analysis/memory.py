"""Memory by phase: what loading the model costs, the resident model, the first call's
peak, and the steady state's peak with its increase over the resident model (what an
input of that size costs), per cell."""

import math

import pandas as pd
from scipy import stats

from dlbench.analysis.startup import first_in_process
from dlbench.format import framework_name

# summary column → heading, in the table's order; the GPU ones appear where present.
PHASES = {
    "load_peak_mb": "load peak",
    "resident_after_model_mb": "model resident",
    "first_call_peak_mb": "first call peak",
    "steady_peak_mb": "steady peak",
    "input_mb": "steady − model",
    "device_resident_after_model_mb": "GPU model",
    "device_first_call_peak_mb": "GPU first call peak",
    "device_steady_peak_mb": "GPU steady peak",
    "device_input_mb": "GPU steady − model",
    "device_process_steady_peak_mb": "NVML steady peak",
}


# A cell's host-memory figures (the process's resident memory and the kernel's peak
# counter): its own only where it was the first cell of its process. A later cell's process
# still holds what the earlier cells left (memory the allocators freed but kept), so its
# load peak and resident model were theirs: in a default run (2 rounds, per_group) every
# PyTorch eager cell showed load peak = resident model, and the growth per 1,000 tokens
# came out negative for JAX's and TensorFlow's four recipes (−371 MiB for JAX jit). The
# GPU figures (the framework's allocator) are kept.
HOST = ["rss_at_start_mb", "load_peak_mb", "resident_after_model_mb", "first_call_peak_mb",
        "steady_peak_mb", "peak_host_rss_mb", "sampled_peak_rss_mb"]


def own_host_memory(cells: pd.DataFrame) -> pd.Series:
    """Whether each cell's host-memory figures are its own: measured in a process where it
    was the first cell (the column `first_in_process`, which a combined record sets; else
    its process's position, as the start-up table judges it)."""
    own = first_in_process(cells)
    if "first_in_process" in cells:
        recorded = cells["first_in_process"]
        own = recorded.where(recorded.notna(), own).astype(bool)
    return own


def without_borrowed_memory(cells: pd.DataFrame) -> pd.DataFrame:
    """The cells with their host-memory figures blank (NaN) where they are not their own."""
    frame = cells.copy()
    borrowed = ~own_host_memory(frame)
    for column in HOST:
        if column in frame:
            frame[column] = frame[column].where(~borrowed)
    return frame


def with_input_cost(cells: pd.DataFrame) -> pd.DataFrame:
    """The cells with input_mb (steady peak − resident model) and its GPU counterpart."""
    frame = cells.copy()
    for prefix in ("", "device_"):
        steady, model = f"{prefix}steady_peak_mb", f"{prefix}resident_after_model_mb"
        if steady in frame and model in frame:
            frame[f"{prefix}input_mb"] = frame[steady] - frame[model]
    return frame


def memory_table(timed: pd.DataFrame) -> pd.DataFrame | None:
    """One row per timed cell that recorded its phases as its own (MiB, no decimals; not
    the cells whose figures were their process's earlier cells', `without_borrowed_memory`):
    framework, optimization, model, batch, seqlen (and device), then the phases present;
    None when no cell recorded them (results measured before dlbench recorded phases)."""
    if "steady_peak_mb" not in timed or timed["steady_peak_mb"].isna().all():
        return None
    cells = with_input_cost(timed[timed["steady_peak_mb"].notna()])
    keys = ["framework", "optimization", "model", "batch", "seqlen"]
    if cells["device"].nunique() > 1:
        keys.append("device")
    present = [c for c in PHASES if c in cells and cells[c].notna().any()]
    table = cells.sort_values(["model", "batch", "seqlen", "framework", "optimization"])[
        keys + present].rename(columns=PHASES)
    table["framework"] = table["framework"].map(framework_name)
    for column in (PHASES[c] for c in present):
        table[column] = table[column].map(lambda v: "—" if pd.isna(v) else f"{v:,.0f}")
    return table.reset_index(drop=True)


def load_versus_steady(timed: pd.DataFrame) -> pd.DataFrame | None:
    """Per framework and optimization, the median over its cells of the load peak, the
    steady peak, the input cost, the measuring process's peak over the whole cell and its
    process tree's (MiB): loading against inference at a glance. The tree's is sampled, the
    sum of its processes' resident memory (torch.compile's compile workers, loader
    workers), which counts a page shared between them in each, and can miss a short peak
    that the process's own counter caught. On an H100
    the process peaked at 1,195 MiB while torch.compile's 16 workers took the tree to
    6,952."""
    cells = with_input_cost(timed)
    if "steady_peak_mb" not in cells or cells["steady_peak_mb"].isna().all():
        return None
    cells = cells[cells["steady_peak_mb"].notna()]
    table = cells.groupby(["framework", "optimization"]).agg(
        cells=("cell_id", "size"), load=("load_peak_mb", "median"),
        steady=("steady_peak_mb", "median"), input=("input_mb", "median"),
        whole=("peak_host_rss_mb", "median"),
        tree=("sampled_peak_rss_mb", "median")).reset_index()
    table["framework"] = table["framework"].map(framework_name)
    for column in ("load", "steady", "input", "whole", "tree"):
        table[column] = table[column].map(lambda v: "—" if pd.isna(v) else f"{v:,.0f}")
    return table.rename(columns={"load": "load peak", "steady": "steady peak",
                                 "input": "steady − model", "whole": "whole-cell peak",
                                 "tree": "with its child processes (sampled)"})


def label(cells: pd.DataFrame) -> pd.Series:
    """'PyTorch eager' per cell: a framework and optimization as a figure's line names it
    (and '(gpu)' after it where the cells ran on more than one device)."""
    names = cells["framework"].map(framework_name) + " " + cells["optimization"]
    return names + " (" + cells["device"] + ")" if cells["device"].nunique() > 1 else names


def against_size(cells: pd.DataFrame, column: str = "steady_peak_mb") -> pd.DataFrame | None:
    """Peak memory (MiB) against input size: one row per model, batch, sequence length
    and their product (tokens), one column per framework and optimization; 'OOM' where
    the cell ran out of memory, '' where it did not run or did not record `column`. Cells
    of timed or out-of-memory status only; None when no timed cell recorded `column`."""
    if column not in cells or cells.loc[cells["timed"], column].isna().all():
        return None
    shown = cells[cells["timed"] | cells["status"].eq("oom")].assign(line=label)
    shown = shown.assign(tokens=shown["batch"] * shown["seqlen"], value=[
        "OOM" if status == "oom" else ("" if pd.isna(v) else f"{v:,.0f}")
        for status, v in zip(shown["status"], shown[column], strict=True)])
    table = shown.pivot_table(index=["model", "batch", "seqlen", "tokens"], columns="line",
                              values="value", aggfunc="first", fill_value="")
    return table.rename_axis(None, axis=1).reset_index().rename(
        columns={"seqlen": "length", "tokens": "batch × length"})


# The fewest input sizes, each measured first in a fresh process, that a growth per token
# is fitted over: with two, a line passes through both and nothing tells its slope from the
# noise of a process's own memory (a default run's JAX eager: 84 and 46 MiB over the model
# at 16 and 64 tokens, a slope of −781 MiB per 1,000 tokens; JAX jit's 55 and 53, −49).
MIN_SIZES = 3


def growth(x: pd.Series, y: pd.Series) -> tuple[float, float] | None:
    """The least-squares slope of y against x (MiB per unit of x) and the half-width of its
    95% interval (Student's t on the residuals, len − 2 degrees of freedom); None with
    fewer than MIN_SIZES distinct x."""
    known = y.notna()
    x, y = x[known].astype(float), y[known].astype(float)
    if x.nunique() < MIN_SIZES:
        return None
    dx = x - x.mean()
    slope = float((dx * (y - y.mean())).sum() / (dx * dx).sum())
    residuals = y - y.mean() - slope * dx
    error = math.sqrt(float((residuals**2).sum()) / (len(x) - 2) / float((dx * dx).sum()))
    return slope, float(stats.t.ppf(0.975, len(x) - 2)) * error


# Where a fitted line falls with the input, its whole interval below zero: memory that
# shrinks as the input grows is no growth but a measurement to look at (borrowed figures,
# another process's allocator), never a figure of the table.
FALLS = "falls ✗"


def _per_1k(fit: tuple[float, float] | None) -> tuple[str, str]:
    """A growth per 1,000 tokens as the table shows it, and its ± (95%): '≤ the interval's
    upper end' where the interval holds zero, FALLS where it lies below zero, '—' where it
    cannot be fitted."""
    if fit is None:
        return "—", ""
    slope, half = 1000 * fit[0], 1000 * fit[1]
    if slope - half > 0:
        return f"{slope:,.1f}", f"{half:,.1f}"
    if slope + half < 0:
        return FALLS, ""
    return f"≤ {slope + half:,.1f}", ""


def per_token(timed: pd.DataFrame) -> pd.DataFrame | None:
    """Per model, framework and optimization (and device, where cells ran on more than
    one): the resident model (MiB, the cells' median) and what input costs as it grows, MiB
    per 1,000 tokens: the growth of the steady peak over the model with batch × length, a
    least-squares slope over the cells with its 95% interval (host and, where recorded,
    GPU: each over the cells that have its figures). Growth, not steady − model divided by
    the input: that difference holds a fixed part (the framework's own buffers, caches and
    threads of running at all) that division would spread over the tokens, the more per
    token the smaller the input. '—' where the cells measured fewer than MIN_SIZES sizes
    with figures of their own. None when no cell recorded its phases."""
    cells = _sized(timed)
    if cells is None:
        return None
    gpu = "device_input_mb" in cells and cells["device_input_mb"].notna().any()
    keys = ["model", "framework", "optimization"]
    if cells["device"].nunique() > 1:
        keys.append("device")
    rows = []
    for key, group in cells.groupby(keys):
        row = dict(zip(keys, key, strict=True))
        median = group.get("resident_after_model_mb", pd.Series(dtype=float)).median()
        row["model resident"] = "—" if pd.isna(median) else f"{median:,.1f}"
        row["MiB per 1k tokens"], row["±"] = _per_1k(
            growth(group["tokens"], group["input_mb"]) if "input_mb" in group else None)
        if gpu:
            row["GPU MiB per 1k tokens"], row["GPU ±"] = _per_1k(
                growth(group["tokens"], group["device_input_mb"]))
        rows.append(row)
    table = pd.DataFrame(rows)
    table["framework"] = table["framework"].map(framework_name)
    return table


def estimated(table: pd.DataFrame | None) -> bool:
    """Whether a per_token table holds any growth (else every row says '—')."""
    if table is None:
        return False
    growths = [c for c in table if c.endswith("MiB per 1k tokens")]
    return bool((table[growths] != "—").any(axis=None))


def sizes_of_their_own(timed: pd.DataFrame) -> int:
    """The most input sizes whose memory is their own (a host or GPU figure over the model)
    that one framework and optimization measured on one device."""
    cells = _sized(timed)
    if cells is None:
        return 0
    keys = ["model", "framework", "optimization", "device"]
    return int(cells.groupby(keys)["tokens"].nunique().max())


def _sized(timed: pd.DataFrame) -> pd.DataFrame | None:
    """The cells with a host or GPU input cost of their own (with_input_cost) and their
    tokens (batch × length); None where there is none."""
    cells = with_input_cost(timed)
    columns = [c for c in ("input_mb", "device_input_mb") if c in cells]
    if not columns or cells[columns].isna().all(axis=None):
        return None
    return cells[cells[columns].notna().any(axis=1)].assign(
        tokens=lambda c: c["batch"] * c["seqlen"])
