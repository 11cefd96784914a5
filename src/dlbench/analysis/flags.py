"""The stability flags of the cells: as the harness stored them, and recomputed from the
stored figures with the harness's own thresholds (dlbench.measure.flags)."""

import pandas as pd

from dlbench.measure import flags as harness

FLAG_COLUMNS = ("flags_unstable", "flags_noisy_machine")


def flagged(cells: pd.DataFrame) -> pd.Series:
    """Whether the harness flagged each cell unstable or noisy (False where not stored)."""
    result = pd.Series(False, index=cells.index)
    for column in FLAG_COLUMNS:
        if column in cells:
            result |= cells[column].astype("boolean").fillna(False).astype(bool)
    return result


def recompute(cells: pd.DataFrame) -> pd.DataFrame:
    """The flags of the timed cells from their relative IQR and CPU steal fraction, as
    columns unstable, noisy_machine and reasons ('; '-joined, as in the summary).

    The summary keeps the utilization window of a cell's first process only: for a cell
    measured in several processes (`dlbench run --repeats`) the harness took the largest steal
    of them all, so a recomputed noisy flag can be missing where the stored one is set.
    """
    timed = cells[cells["status"].eq("ok") & cells["relative_iqr"].notna()]
    steal = (timed["utilization_steal_fraction"] if "utilization_steal_fraction" in timed
             else pd.Series(float("nan"), index=timed.index))
    rows = []
    for relative_iqr, stolen in zip(timed["relative_iqr"], steal, strict=True):
        window = None if pd.isna(stolen) else {"steal_fraction": float(stolen)}
        result = harness.flags(float(relative_iqr), [window])
        rows.append({"unstable": result["unstable"], "noisy_machine": result["noisy_machine"],
                     "reasons": "; ".join(result["reasons"])})
    return pd.DataFrame(rows, index=timed.index,
                        columns=["unstable", "noisy_machine", "reasons"])
