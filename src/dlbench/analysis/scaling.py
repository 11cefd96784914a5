"""Throughput against batch size and against sequence length, with the 95% interval of each
cell's time carried over: samples/s = batch / time, tokens/s = batch × length / time, and
the interval's ends from the time's (the slow end is the low end of the throughput). The
time is the one the answer ranks by (headline_ms: the median, in rounds the level)."""

import pandas as pd

from dlbench.analysis.memory import label


def throughput(timed: pd.DataFrame) -> pd.DataFrame:
    """The timed cells with a right answer: line (framework and optimization), model,
    device, batch, seqlen, and samples/s and tokens/s each with `_low`/`_high` (NaN where
    the median has no interval, or none above 0: no upper bound of the rate)."""
    cells = timed[~timed["wrong_answer"]]
    shortest = cells["headline_ci95_ms_low"].where(cells["headline_ci95_ms_low"] > 0)
    out = cells[["model", "device", "batch", "seqlen"]].assign(line=label(cells))
    for name, per in (("samples", cells["batch"]), ("tokens", cells["batch"] * cells["seqlen"])):
        out[f"{name}_s"] = 1000 * per / cells["headline_ms"]
        out[f"{name}_s_low"] = 1000 * per / cells["headline_ci95_ms_high"]
        out[f"{name}_s_high"] = 1000 * per / shortest
    return out.sort_values(["model", "line", "batch", "seqlen"]).reset_index(drop=True)


def series(points: pd.DataFrame, axis: str) -> tuple[pd.DataFrame, str, int | None]:
    """The points of a plot against `axis` ('batch' or 'seqlen'): the other size held at
    its largest value that more than one `axis` value was measured at (the most points),
    and that value's name and value; all points and None where no value qualifies."""
    other = "seqlen" if axis == "batch" else "batch"
    counts = points.groupby(other)[axis].nunique()
    several = counts[counts > 1]
    if several.empty:
        return points, other, None
    held = int(several.index.max())
    return points[points[other].eq(held)], other, held


def table(points: pd.DataFrame) -> pd.DataFrame:
    """Samples/s per model, batch and length (rows) and line (columns), with the 95%
    interval: '1,234 (1,200–1,260)'."""
    def text(row) -> str:
        value = f"{row.samples_s:,.0f}"
        if pd.isna(row.samples_s_low) or pd.isna(row.samples_s_high):
            return value
        return f"{value} ({row.samples_s_low:,.0f}–{row.samples_s_high:,.0f})"

    shown = points.assign(text=[text(r) for r in points.itertuples()])
    wide = shown.pivot_table(index=["model", "batch", "seqlen"], columns="line", values="text",
                             aggfunc="first", fill_value="")
    return wide.rename_axis(None, axis=1).reset_index().rename(columns={"seqlen": "length"})
