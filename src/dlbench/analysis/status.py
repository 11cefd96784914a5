"""How many cells ended in each status, and which cells have no timing."""

import pandas as pd

from dlbench.report.format import framework_name

STATUSES = ["ok", "oom", "unsupported", "error"]


def status_counts(frame: pd.DataFrame) -> pd.DataFrame:
    """Cells per framework (rows, then 'total') and status (columns, then 'total')."""
    counts = pd.crosstab(frame["framework"].map(framework_name), frame["status"])
    counts = counts.reindex(columns=STATUSES + sorted(set(counts.columns) - set(STATUSES)),
                            fill_value=0)
    counts.loc["total"] = counts.sum()
    counts["total"] = counts.sum(axis=1)
    return counts.rename_axis(None, axis=1).reset_index(names="framework")


def untimed(frame: pd.DataFrame) -> pd.DataFrame:
    """cell_id, status and reason ('—' if none) of every cell whose status is not ok."""
    failed = frame[frame["status"].ne("ok")].sort_values(["status", "cell_id"])
    return failed[["cell_id", "status", "reason"]].fillna("—")
