"""The table of a scenario that has no report section of its own: one row per cell with its
parameters, status, reason, median, percentiles and throughput."""

import re

import pandas as pd

from dlbench.analysis.summary import axes, is_measurement
from dlbench.format import fmt_ms

# The axes of every scenario, first in the table; the scenario's sizes follow them.
IDENTITY = ["framework", "model", "device", "optimization"]
_PERCENTILE = re.compile(r"p(\d+)_ms")


def parameter_columns(cells: pd.DataFrame) -> list[str]:
    """The parameters of these cells: the identity axes, then their scenario's axes — from
    the registry where the scenario is known here, else every other column that is not a
    measurement and has a value in at least one of them (in summary order)."""
    present = [c for c in cells.columns if cells[c].notna().any()]
    known = {a for scenario in cells["scenario"].dropna().unique() for a in axes(scenario)}
    if known:
        return [c for c in IDENTITY if c in present] + [c for c in present if c in known]
    return ([c for c in IDENTITY if c in present]
            + [c for c in present if c not in IDENTITY and not is_measurement(c)])


def percentile_columns(cells: pd.DataFrame) -> list[str]:
    """'p<n>_ms' columns with a value, by percentile."""
    found = [c for c in cells.columns if _PERCENTILE.fullmatch(c) and cells[c].notna().any()]
    return sorted(found, key=lambda c: int(_PERCENTILE.fullmatch(c).group(1)))


def throughput_columns(cells: pd.DataFrame) -> list[str]:
    """'<unit>_per_s' columns with a value."""
    return [c for c in cells.columns if c.endswith("_per_s") and cells[c].notna().any()]


def scenario_table(cells: pd.DataFrame) -> pd.DataFrame:
    """One row per cell, sorted by its parameters: the parameters, status, reason ('' if
    none), median ms, percentiles ms and throughput (3 significant digits, '' if none)."""
    parameters = parameter_columns(cells)
    timings = ["median_ms"] + percentile_columns(cells)
    throughput = throughput_columns(cells)
    table = cells.sort_values(parameters)[parameters + ["status", "reason"] + timings
                                          + throughput].copy()
    table["reason"] = table["reason"].fillna("")
    for column in timings + throughput:
        table[column] = table[column].map(fmt_ms)
    names = {c: c.removesuffix("_ms").replace("_", " ") + " ms" for c in timings}
    names |= {c: c.removesuffix("_per_s").replace("_", " ") + "/s" for c in throughput}
    return table.rename(columns=names)
