"""What an optimization costs before it runs fast: prepare, first call and compile time."""

import pandas as pd

from dlbench.analysis.summary import group_keys
from dlbench.report.format import fmt_s, framework_name


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
