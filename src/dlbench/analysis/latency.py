"""The median latencies laid out like the 2019 HuggingFace transformers benchmark: one
sheet per framework, optimization and device; rows model × batch, columns sequence length."""

from dataclasses import dataclass

import pandas as pd

from dlbench.analysis.flags import flagged
from dlbench.analysis.status import not_applicable
from dlbench.format import blank_repeats, fmt_error, fmt_ms, framework_rank, na

UNSTABLE_MARK = " †"  # the harness flagged the timing unstable or noisy
WRONG_MARK = " ✗"  # the output is outside its precision's tolerance
NOT_IN_MATRIX = "—"


@dataclass
class Sheet:
    """The latency sheet of one framework, optimization and device. Either `table` (display
    strings) with `tooltips` (the full reasons, shaped like it), or `not_run`: (cells,
    status, reason) when all of several cells share one status other than ok."""

    framework: str
    optimization: str
    device: str
    table: pd.DataFrame | None = None
    tooltips: pd.DataFrame | None = None
    not_run: tuple[int, str, str] | None = None


def error_note(row) -> str:
    """'wrong answer: max rel error 1.2e-02 > tolerance 1.0e-04' for a wrong answer."""
    if not row.wrong_answer:
        return ""
    if row.correctness_max_rel_error is None or pd.isna(row.correctness_max_rel_error):
        return "wrong answer: the output is not finite"
    return (f"wrong answer: max rel error {fmt_error(row.correctness_max_rel_error)} > "
            f"tolerance {fmt_error(row.correctness_tolerance)}")


def spreadsheet(cells: pd.DataFrame, values: list[str]) -> pd.DataFrame:
    """Rows (model, batch), columns 'seqlen <n>', the strings in `values` (one per cell);
    '—' where the matrix has no such cell; the model named on its first row only."""
    table = cells.assign(value=values).pivot_table(
        index=["model", "batch"], columns="seqlen", values="value", aggfunc="first"
    )
    table = table.sort_index(axis=1).fillna(NOT_IN_MATRIX)
    table.columns = [f"seqlen {s}" for s in table.columns]
    return blank_repeats(table.reset_index(), "model")


def cell_texts(cells: pd.DataFrame) -> tuple[list[str], list[str]]:
    """Each cell's display string (its time, † flagged, ✗ wrong; N/A with the reason) and
    its tooltip (the flags' reasons and the error; the full reason of an N/A). The time is
    the one the answer ranks by (headline_ms): the median, or in rounds the geometric mean
    of the rounds' medians, so that this sheet and the answer show one figure per cell."""
    timed = cells["status"].eq("ok") & cells["median_ms"].notna()
    flags = flagged(cells)
    reasons = cells.get("flags_reasons", pd.Series("", index=cells.index))
    text, tips = [], []
    for t, f, why, r in zip(timed, flags, reasons, cells.itertuples(), strict=True):
        if t:
            text.append(fmt_ms(r.headline_ms) + (UNSTABLE_MARK if f else "")
                        + (WRONG_MARK if r.wrong_answer else ""))
            tips.append(" · ".join(filter(None, [why if f else "", error_note(r)])))
        else:
            text.append(na(r.status, r.reason))
            tips.append(f"{r.status}: {r.reason or 'no reason given'}")
    return text, tips


def sheet(cells: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The spreadsheet of median latencies and its tooltips."""
    text, full = cell_texts(cells)
    tips = spreadsheet(cells, full).replace(NOT_IN_MATRIX, "")
    tips[["model", "batch"]] = ""
    return spreadsheet(cells, text), tips


def sheets(frame: pd.DataFrame) -> list[Sheet]:
    """One sheet per framework, optimization and device, in that order; none for a
    framework with another framework's optimization (not applicable by design: the
    status section counts those)."""
    frame = frame[~not_applicable(frame)]
    groups = frame.dropna(subset=["framework"]).groupby(
        ["framework", "optimization", "device"], dropna=False, sort=True
    )
    result = []
    # Frameworks in the registry's order (stable: each one's optimizations stay sorted).
    for (framework, optimization, device), cells in sorted(
            groups, key=lambda group: framework_rank(group[0][0])):
        one = Sheet(framework, optimization, device)
        reasons = cells[["status", "reason"]].fillna("").drop_duplicates()
        if len(cells) > 1 and len(reasons) == 1 and reasons["status"].iloc[0] != "ok":
            status, reason = reasons.iloc[0]
            one.not_run = (len(cells), status, reason)
        else:
            one.table, one.tooltips = sheet(cells)
        result.append(one)
    return result
