"""The error of each cell's output against the reference, and the wrong answers."""

import pandas as pd

from dlbench.analysis.summary import group_keys
from dlbench.format import fmt_error, fmt_ms, framework_name


def errors(timed: pd.DataFrame, several_devices: bool) -> pd.DataFrame:
    """Per framework and optimization (and device) of the checked cells: precision, cells,
    the largest absolute and relative error, the tolerance, and how many are wrong."""
    checked = timed[timed["checked"]]
    table = checked.groupby(group_keys(several_devices)).agg(
        precision=("correctness_precision", "first"), cells=("cell_id", "size"),
        abs_error=("correctness_max_abs_error", "max"),
        rel_error=("correctness_max_rel_error", "max"),
        tolerance=("correctness_tolerance", "max"), wrong=("wrong_answer", "sum"),
    ).reset_index()
    table["framework"] = table["framework"].map(framework_name)
    for column in ("abs_error", "rel_error", "tolerance"):
        table[column] = table[column].map(fmt_error)
    table["wrong"] = [f"✗ {int(w)}" if w else "0" for w in table["wrong"]]
    return table.rename(columns={"abs_error": "max abs error", "rel_error": "max rel error",
                                 "wrong": "outside tolerance"})


def wrong_answers(timed: pd.DataFrame) -> pd.DataFrame:
    """The timed cells with a wrong answer, the largest speed-up first."""
    return timed[timed["wrong_answer"]].sort_values("speedup", ascending=False)


def wrong_answer_table(wrong: pd.DataFrame) -> pd.DataFrame:
    """The wrong answers as displayed: cell, speed-up, time (the headline's: the median,
    training's wall time per step), errors and tolerance."""
    return pd.DataFrame({
        "cell": wrong["cell_id"],
        "speed-up over eager": wrong["speedup"].map(
            lambda v: "—" if pd.isna(v) else f"{v:.2f}×"),
        "ms": wrong["headline_ms"].map(fmt_ms),
        "max abs error": wrong["correctness_max_abs_error"].map(fmt_error),
        "max rel error": wrong["correctness_max_rel_error"].map(fmt_error),
        "tolerance": wrong["correctness_tolerance"].map(fmt_error),
    })
