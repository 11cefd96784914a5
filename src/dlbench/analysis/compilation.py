"""What an optimization costs before it runs fast: prepare, first call and compile time."""

import pandas as pd

from dlbench.analysis.summary import group_keys
from dlbench.format import fmt_s, framework_name


def compile_times(timed: pd.DataFrame, several_devices: bool) -> pd.DataFrame:
    """Per framework and optimization (and device): cells, median prepare, first call and
    compile time, and the slowest cell's compile time (strings, in seconds)."""
    table = timed.groupby(group_keys(several_devices)).agg(
        cells=("cell_id", "size"), prepare=("prepare_s", "median"),
        first=("cold_start_s", "median"), compile=("compile_s", "median"),
        slowest=("compile_s", "max"),
    ).reset_index()
    table["framework"] = table["framework"].map(framework_name)
    for column in ("prepare", "first", "compile", "slowest"):
        table[column] = table[column].map(fmt_s)
    return table.rename(columns={
        "prepare": "prepare (s)", "first": "first call (s)", "compile": "compile time (s)",
        "slowest": "slowest cell (s)"})


def compile_per_model(timed: pd.DataFrame, several_devices: bool) -> pd.DataFrame:
    """The median compile time per framework and optimization (rows) and model (columns)."""
    keys = group_keys(several_devices)
    table = timed.pivot_table(index=keys, columns="model", values="compile_s", aggfunc="median")
    table = table.map(fmt_s).reset_index()
    table["framework"] = table["framework"].map(framework_name)
    table.columns.name = None
    return table


def graphs(timed: pd.DataFrame) -> pd.DataFrame | None:
    """The cells that count their compiled graphs (torch.compile's dynamo counters, JAX
    jit's XLA programs): graphs, graph breaks, recompilations and the first break
    reasons; the cells that did not compile to one graph first. None without such cells."""
    if "compilation_graphs" not in timed or timed["compilation_graphs"].isna().all():
        return None
    cells = timed[timed["compilation_graphs"].notna()].copy()
    breaks = cells.get("compilation_graph_breaks", 0)
    recompiles = cells.get("compilation_recompiles", 0)
    cells["one graph"] = (cells["compilation_graphs"].eq(1) & pd.Series(breaks).eq(0)
                          & pd.Series(recompiles).eq(0))
    table = cells.sort_values(["one graph", "cell_id"])[[
        "cell_id", "compilation_graphs", "compilation_graph_breaks", "compilation_recompiles",
        "one graph"] + [c for c in ["compilation_break_reasons"] if c in cells]]
    table["one graph"] = table["one graph"].map({True: "✓", False: "✗"})
    return table.rename(columns={
        "cell_id": "cell", "compilation_graphs": "graphs",
        "compilation_graph_breaks": "graph breaks", "compilation_recompiles": "recompilations",
        "compilation_break_reasons": "first break reasons"}).fillna("")
