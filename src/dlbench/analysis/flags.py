"""The flags of the cells: as the harness stored them, and recomputed from the stored
figures with the harness's own thresholds (dlbench.measure.flags)."""

import pandas as pd

from dlbench.measure import flags as harness

FLAG_COLUMNS = tuple(f"flags_{name}" for name in harness.FLAGS)


def flagged(cells: pd.DataFrame) -> pd.Series:
    """Whether the harness flagged each cell (any flag; False where not stored)."""
    return _any(cells, harness.FLAGS)


def noisy(cells: pd.DataFrame) -> pd.Series:
    """Whether each cell has a noise flag (busy or noisy machine, unstable, spread between
    processes, interval not reached): its timing describes the machine as much as the cell."""
    return _any(cells, harness.NOISE)


def _any(cells: pd.DataFrame, names: tuple[str, ...]) -> pd.Series:
    result = pd.Series(False, index=cells.index)
    for column in (f"flags_{name}" for name in names):
        if column in cells:
            result |= cells[column].astype("boolean").fillna(False).astype(bool)
    return result


def _value(row: pd.Series, *columns: str):
    """The first of these columns that the row has a value in (None if none)."""
    for column in columns:
        value = row.get(column)
        if value is not None and not pd.isna(value):
            return value
    return None


def recompute(cells: pd.DataFrame) -> pd.DataFrame:
    """The flags of the timed cells from their stored figures (columns named after
    dlbench.measure.flags.FLAGS, and reasons '; '-joined, as in the summary).

    The summary keeps the utilization window of a cell's first process only: for a cell
    measured in several processes (`repeats`) the harness took the largest steal and
    other load of them all, so a recomputed noisy or busy flag can be missing where the
    stored one is set.
    """
    timed = cells[cells["status"].eq("ok") & cells["relative_iqr"].notna()]
    rows = []
    for _, row in timed.iterrows():
        window = {"steal_fraction": _value(row, "utilization_steal_fraction"),
                  "other_load_cores": _value(row, "utilization_other_load_cores"),
                  "logical_cpus": _value(row, "utilization_logical_cpus", "env_logical_cpus")}
        if window["steal_fraction"] is None:
            window = None
        interval = {"target_ci": _value(row, "target_ci"), "stopped_by": _value(row, "stopped_by"),
                    "median_ci95_half_width": _value(row, "median_ci95_half_width")}
        compilation = None
        if _value(row, "compilation_graphs") is not None:
            compilation = {key: int(_value(row, f"compilation_{key}") or 0)
                           for key in ("graphs", "graph_breaks", "recompiles")}
            after_warmup = _value(row, "compilation_recompiles_after_second_call")
            if after_warmup is not None:
                compilation["recompiles_after_second_call"] = int(after_warmup)
        beside = _value(row, "machine_noise_relative_iqr")
        threads = _value(row, "intra_op_threads")
        result = harness.flags(float(row["relative_iqr"]), [window],
                               threads=None if threads is None else int(threads),
                               between_cv=_value(row, "between_processes_cv"),
                               interval=interval, compilation=compilation,
                               noise=None if beside is None else {"relative_iqr": beside})
        rows.append({name: result[name] for name in harness.FLAGS}
                    | {"reasons": "; ".join(result["reasons"])})
    return pd.DataFrame(rows, index=timed.index, columns=[*harness.FLAGS, "reasons"])
