"""The fixed cost a process pays before its timed loop: imports, model, first call."""

import pandas as pd

from dlbench.format import fmt_fixed, framework_name

PHASES = {
    "imports_done_s": "imports done (s)",
    "model_built_s": "model built (s)",
    "model_ready_s": "model ready (s)",
    "first_timed_iteration_s": "first timed iteration (s)",
    "cold_start_s": "cold call (s)",
}
# A job forked by a warm parent (dlbench.warm) found its framework imported: its marks show
# what it paid, and this what the import cost the parent, once.
WARM_PARENT = "process_warm_parent_imports_s"
PARENT_COLUMN = "imported once by a warm parent (s)"


def grouped(timed: pd.DataFrame) -> pd.Series:
    """Whether each cell was measured in a process with other cells (per_group)."""
    if "process_cells" not in timed:
        return pd.Series(False, index=timed.index)
    return timed["process_cells"].gt(1)


def side_by_side(timed: pd.DataFrame) -> pd.Series:
    """Whether each cell's process took turns at the CPU with other recipes' (side_by_side)."""
    if "process_side_by_side_sides" not in timed:
        return pd.Series(False, index=timed.index)
    return timed["process_side_by_side_sides"].notna()


def most_startups_at_once(timed: pd.DataFrame) -> int:
    """The most start-ups that side-by-side processes were let run at once (1: each alone;
    0: no cell measured side by side)."""
    column = "process_side_by_side_startups"
    if column not in timed or timed[column].isna().all():
        return 1 if side_by_side(timed).any() else 0
    return int(timed[column].max())


def first_in_process(timed: pd.DataFrame) -> pd.Series:
    """Whether each cell was the first of its process (it paid the imports)."""
    if "process_position" not in timed:
        return pd.Series(True, index=timed.index)
    return timed["process_position"].fillna(0).eq(0)


def startup(timed: pd.DataFrame) -> pd.DataFrame | None:
    """Per scenario, model, framework and optimization (one workload: a framework's BERT
    and its CNN start alike only by chance), the medians over the cells that were first in
    their process of each phase's seconds since process start; None without such cells."""
    present = [c for c in PHASES if c in timed]
    fresh = timed[first_in_process(timed)]
    if fresh.empty or not present:
        return None
    by = fresh.groupby(["scenario", "model", "framework", "optimization"])
    table = by[present].median()
    if WARM_PARENT in fresh and fresh[WARM_PARENT].notna().any():
        table[PARENT_COLUMN] = by[WARM_PARENT].median()
    table.insert(0, "cells", by.size())
    table = table.rename(columns=PHASES).reset_index()
    table["framework"] = table["framework"].map(framework_name)
    for column in table.columns[5:]:
        table[column] = table[column].map(lambda v: fmt_fixed(v, missing="—"))
    return table
