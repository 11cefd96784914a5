"""How many cells ended in each status, which cells have no timing, and which of those are
not applicable by design (an optimization of the other framework): counted once as such,
never listed among the cells that failed; and which cells come from elsewhere."""

import pandas as pd

from dlbench.catalogue.axes import OTHER_FRAMEWORK
from dlbench.format import framework_name, framework_rank
from dlbench.records import origin

STATUSES = ["ok", "oom", "unsupported", "error"]
NOT_APPLICABLE = "not applicable"


def not_applicable(frame: pd.DataFrame) -> pd.Series:
    """Whether each cell is not applicable by design: unsupported because its optimization
    belongs to the other framework."""
    return frame["status"].eq("unsupported") & frame["reason"].fillna("").str.contains(
        OTHER_FRAMEWORK, regex=False)


def statuses(frame: pd.DataFrame) -> pd.Series:
    """Each cell's status, with 'not applicable' in place of 'unsupported' by design."""
    return frame["status"].astype(object).mask(not_applicable(frame), NOT_APPLICABLE)


def status_counts(frame: pd.DataFrame) -> pd.DataFrame:
    """Cells per framework (rows, then 'total') and status (columns, then 'total'; not
    applicable by design a column of its own)."""
    counts = pd.crosstab(frame["framework"].map(framework_name), statuses(frame))
    order = STATUSES + [NOT_APPLICABLE]
    counts = counts.reindex(columns=order + sorted(set(counts.columns) - set(order)),
                            index=sorted(counts.index, key=framework_rank), fill_value=0)
    if not counts[NOT_APPLICABLE].any():
        counts = counts.drop(columns=NOT_APPLICABLE)
    counts.loc["total"] = counts.sum()
    counts["total"] = counts.sum(axis=1)
    return counts.rename_axis(None, axis=1).reset_index(names="framework")


def untimed(frame: pd.DataFrame) -> pd.DataFrame:
    """cell_id, status and reason ('—' if none) of every cell whose status is not ok, but
    for those not applicable by design."""
    failed = frame[frame["status"].ne("ok") & ~not_applicable(frame)]
    failed = failed.sort_values(["status", "cell_id"])
    return failed[["cell_id", "status", "reason"]].fillna("—")


def from_elsewhere(summary: pd.DataFrame) -> pd.DataFrame:
    """cell_id, status, where it comes from and whether it is compared, for every cell of
    the summary (as aggregated, before `derive` leaves any out) from another machine or
    dlbench version than the run's (dlbench.records.origin)."""
    if origin.FOREIGN not in summary:
        return pd.DataFrame(columns=["cell_id", "status", "from", "compared"])
    cells = summary[summary[origin.FOREIGN].notna()].sort_values("cell_id")
    return pd.DataFrame({"cell_id": cells["cell_id"], "status": cells["status"],
                         "from": cells[origin.FOREIGN],
                         "compared": cells[origin.LEFT_OUT].map({True: "no", False: "yes"})
                         }).reset_index(drop=True)


def not_applicable_combinations(frame: pd.DataFrame) -> pd.DataFrame:
    """framework, optimization and cells: the combinations not applicable by design."""
    cells = frame[not_applicable(frame)]
    table = cells.groupby(["framework", "optimization"]).size().rename("cells").reset_index()
    table["framework"] = table["framework"].map(framework_name)
    return table
