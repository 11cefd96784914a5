"""GPU cells: host and device time, the framework's and NVML's memory, utilization."""

import pandas as pd

from dlbench.catalogue import frameworks
from dlbench.format import fmt_ms

NOT_DECLARED = "not declared by the framework"

_COLUMNS = {"cell_id": "cell", "median_ms": "host median ms",
            "device_time_median_ms": "device median ms",
            "device_allocated_peak_mb": "allocated peak MiB",
            "device_reserved_peak_mb": "reserved peak MiB",
            "device_steady_peak_mb": "steady peak MiB",
            "utilization_gpu_process_memory_peak_mb": "NVML process MiB",
            "device_process_steady_peak_mb": "NVML steady MiB",
            "utilization_gpu_utilization_mean": "GPU busy %",
            "utilization_sm_clock_mhz_mean": "SM clock MHz"}


def gpu_cells(timed: pd.DataFrame) -> pd.DataFrame:
    """The timed cells that ran on a GPU."""
    return timed[timed["device"].eq("gpu")]


def gpu_table(gpu: pd.DataFrame) -> pd.DataFrame:
    """One row per GPU cell, the columns present: times in ms, memory, busy %, SM clock."""
    table = gpu[[c for c in _COLUMNS if c in gpu]].rename(columns=_COLUMNS)
    for column in table.columns[1:]:
        table[column] = table[column].map(
            lambda v, ms="ms" in column: "—" if pd.isna(v) else (fmt_ms(v) if ms
                                                                 else f"{v:,.0f}"))
    return table


def how_measured() -> list[str]:
    """One line per registered framework, in the registry's order: how its GPU cells are
    timed and where their GPU memory figures come from, as its declaration says."""
    return [f"**{f.label}**: timed {f.gpu_timing or NOT_DECLARED}; memory: "
            f"{f.gpu_memory or NOT_DECLARED}." for f in frameworks.declarations()]
