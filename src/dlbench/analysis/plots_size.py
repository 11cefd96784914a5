"""Figures against input size: peak memory (out-of-memory cells marked) and throughput with
its 95% interval as error bars; drawn on a figure the caller provides, one panel per model."""

import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter

from dlbench.analysis.memory import label
from dlbench.analysis.plots import log2_axis
from dlbench.analysis.scaling import series

PANEL = (5.0, 3.4)  # inches per panel
AXIS_NAMES = {"batch": "batch size (samples)", "seqlen": "sequence length (tokens)"}


def _panels(figure: Figure, models: list, columns: int = 1):
    figure.set_size_inches(PANEL[0] * columns + 2.2, PANEL[1] * len(models))
    return figure.subplots(len(models), columns, squeeze=False)


def _finish(figure: Figure, axes) -> None:
    handles, labels = {}, {}
    for ax in axes.flat:
        for handle, text in zip(*ax.get_legend_handles_labels(), strict=True):
            handles.setdefault(text, handle)
            labels[text] = text
    figure.legend(list(handles.values()), list(labels), loc="center right", frameon=False)
    figure.tight_layout(rect=(0, 0, 1 - 2.2 / figure.get_figwidth(), 1))


def memory_vs_size(cells: pd.DataFrame, figure: Figure, column: str = "steady_peak_mb",
                   what: str = "steady peak host memory (MiB)") -> Figure:
    """`column` against batch × length (tokens), one line per framework and optimization
    (and sequence length by marker), one panel per model; an out-of-memory cell is a red ✕
    at the top of its panel, at its input size."""
    cells = cells.assign(line=label(cells), tokens=cells["batch"] * cells["seqlen"])
    models = sorted(cells["model"].unique())
    axes = _panels(figure, models)
    for ax, model in zip(axes[:, 0], models, strict=True):
        panel = cells[cells["model"].eq(model)]
        measured = panel[panel["timed"] & panel[column].notna()]
        for line, points in measured.groupby("line"):
            points = points.sort_values("tokens")
            ax.plot(points["tokens"], points[column], marker="o", label=line)
        oom = panel[panel["status"].eq("oom")]
        if not oom.empty:
            top = measured[column].max() if not measured.empty else 1.0
            ax.scatter(oom["tokens"], np.full(len(oom), top * 1.1), marker="x", color="red",
                       s=60, label="out of memory", clip_on=False)
            ax.set_ylim(top=top * 1.2)
        log2_axis(ax, sorted(panel["tokens"].unique()))
        ax.set_ylim(bottom=0)
        ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:,.0f}"))
        ax.set_title(model)
        ax.set_xlabel("input size: batch × sequence length (tokens)")
        ax.set_ylabel(what)
    _finish(figure, axes)
    return figure


def throughput_vs_size(points: pd.DataFrame, figure: Figure) -> Figure:
    """Samples/s against batch size (left) and tokens/s against sequence length (right),
    the other size held (see dlbench.analysis.scaling.series), with the 95% intervals as
    error bars; one row of panels per model."""
    models = sorted(points["model"].unique())
    axes = _panels(figure, models, columns=2)
    for row, model in enumerate(models):
        for ax, axis, unit in ((axes[row, 0], "batch", "samples"),
                               (axes[row, 1], "seqlen", "tokens")):
            shown, other, held = series(points[points["model"].eq(model)], axis)
            for line, data in shown.groupby("line"):
                data = data.sort_values(axis)
                value = data[f"{unit}_s"]
                errors = np.vstack([value - data[f"{unit}_s_low"],
                                    data[f"{unit}_s_high"] - value]).clip(min=0)
                ax.errorbar(data[axis], value, yerr=np.nan_to_num(errors), marker="o",
                            capsize=3, label=line)
            log2_axis(ax, sorted(shown[axis].unique()))
            ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:,.0f}"))
            fixed = f", {'length' if other == 'seqlen' else 'batch'} {held}" if held else ""
            ax.set_title(f"{model}{fixed}")
            ax.set_xlabel(AXIS_NAMES[axis])
            ax.set_ylabel(f"throughput ({unit}/s)")
    _finish(figure, axes)
    return figure
