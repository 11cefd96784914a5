"""The report's figures, each drawn on axes or a figure that the caller provides.

Plain matplotlib: seaborn, which these figures once used, imports scipy.stats, a second or
so of CPU in every report's kernel."""

import math

import matplotlib as mpl
import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.colors import Colormap, Normalize
from matplotlib.figure import Figure
from matplotlib.ticker import Formatter, FuncFormatter, NullLocator

from dlbench.analysis.ratio import FASTEST
from dlbench.analysis.speedup import Panel
from dlbench.analysis.uncertainty import TIE
from dlbench.catalogue import axes
from dlbench.format import framework_name, framework_rank

# A framework's colour is its place in the registry (PyTorch blue, TensorFlow orange, the
# next green …): the same in every report, for any number of frameworks.
_PALETTE = mpl.colormaps["tab10"].colors
UNKNOWN_COLOR = "tab:gray"


def framework_color(framework: str) -> tuple | str:
    """The colour of a framework, by its name or its label; grey for an unknown one."""
    rank = framework_rank(framework)[0]
    return _PALETTE[rank % len(_PALETTE)] if rank < len(axes.FRAMEWORKS) else UNKNOWN_COLOR
PANEL_HEIGHT, PANEL_ASPECT = 3.0, 1.4  # inches per panel of the latency plot
LEGEND_WIDTH = 2.0  # inches


# The markers and dash patterns of the optimizations, in order of appearance (seaborn's
# first ones, which these figures once drew with; then again from the first).
_MARKERS = ["o", "X", (4, 0, 45), "P", (4, 0, 0), (4, 1, 0), "^", (4, 1, 45), "v",
            (6, 1, 30), (6, 0, 30), (5, 1, 0), (5, 0, 0)]
_DASHES = [(), (4, 1.5), (1, 1), (3, 1.25, 1.5, 1.25), (5, 1, 1, 1),
           (3, 1.25, 1.25, 1.25, 1.25, 1.25), (4, 1, 4, 1, 1, 1), (3, 1.25, 3, 1.25, 1.25, 1.25),
           (4, 1, 1, 1, 1, 1)]
_LINE = {"markersize": 8, "markeredgewidth": 0.75, "markeredgecolor": "w"}


def log2_axis(ax: Axes, values) -> None:
    """A log2 x axis ticked at `values` in plain numbers (1, 2, 1,024): the report turns
    matplotlib's mathtext off (record text is shown as text), so its own 2^x labels would
    read `$\\mathdefault{2^{0}}$`."""
    ax.set_xscale("log", base=2)
    ax.set_xticks(values, [f"{v:,}" for v in values])
    ax.minorticks_off()
    ax.grid(True, alpha=0.3)


def despine(ax: Axes) -> None:
    """No frame above and to the right of the plot."""
    ax.spines[["top", "right"]].set_visible(False)


class _PlainNumbers(Formatter):
    """The ticks that `chooser` labels (a log axis labels some minor ticks when its range is
    under a decade or two), as plain numbers: its own labels are mathtext, shown as raw
    `$\\mathdefault{2\\times10^{1}}$` since the report turns mathtext off."""

    def __init__(self, chooser: Formatter):
        self.chooser = chooser

    def set_axis(self, axis) -> None:
        super().set_axis(axis)
        self.chooser.set_axis(axis)

    def set_locs(self, locs) -> None:
        self.chooser.set_locs(locs)

    def __call__(self, value, pos=None) -> str:
        return f"{value:g}" if self.chooser(value, pos) else ""


def latency_vs_length(timed: pd.DataFrame, figure: Figure) -> Figure:
    """Median latency (log scale) against sequence length (log 2 scale), one panel per
    model (rows) and batch size (columns); colour the framework (and device, if several),
    marker and line style the optimization. Sizes the figure to its panels."""
    data = timed.assign(framework=timed["framework"].map(framework_name))
    names = sorted(data["framework"].unique(), key=framework_rank)
    hue, palette = "framework", None
    if all(framework_color(name) != UNKNOWN_COLOR for name in names):
        palette = {name: framework_color(name) for name in names}
    if data["device"].nunique() > 1:
        palette = None
        hue = "framework (device)"
        data[hue] = data["framework"] + " (" + data["device"] + ")"
    data = data.sort_values("seqlen").sort_values(  # frameworks in the registry's order
        "framework", key=lambda column: column.map(framework_rank), kind="stable")
    models, batches = sorted(data["model"].unique()), sorted(data["batch"].unique())
    seqlens = sorted(data["seqlen"].unique())
    # The same colours and markers in every panel, in order of appearance; without a
    # framework's own colour, the colour cycle's.
    hues, optimizations = list(data[hue].unique()), list(data["optimization"].unique())
    if palette is None:
        cycle = mpl.rcParams["axes.prop_cycle"].by_key()["color"]
        palette = {name: cycle[k % len(cycle)] for k, name in enumerate(hues)}
    styles = {name: {"marker": _MARKERS[k % len(_MARKERS)],
                     "dashes": _DASHES[k % len(_DASHES)]}
              for k, name in enumerate(optimizations)}
    figure.set_size_inches(PANEL_HEIGHT * PANEL_ASPECT * len(batches) + LEGEND_WIDTH,
                           PANEL_HEIGHT * len(models))
    axes = figure.subplots(len(models), len(batches), sharex=True, sharey=True, squeeze=False)
    for (i, model), (j, batch) in ((m, b) for m in enumerate(models) for b in enumerate(batches)):
        ax = axes[i, j]
        panel = data[data["model"].eq(model) & data["batch"].eq(batch)]
        # the answer's time (in rounds, the level); the mean over devices' repeats
        lines = panel.dropna(subset=["headline_ms"]).groupby(
            [hue, "optimization", "seqlen"])["headline_ms"].mean()
        for name in hues:
            for optimization in optimizations:
                if (name, optimization) in lines.index.droplevel("seqlen"):
                    line = lines.loc[(name, optimization)]  # by length
                    ax.plot(line.index, line.to_numpy(), color=palette[name],
                            **styles[optimization], **_LINE)
        ax.set_yscale("log")
        ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
        ax.yaxis.set_minor_formatter(_PlainNumbers(ax.yaxis.get_minor_formatter()))
        ax.set_xscale("log", base=2)
        ax.set_xticks(seqlens, [str(s) for s in seqlens])
        ax.xaxis.set_minor_locator(NullLocator())
        ax.grid(True, which="major", alpha=0.3)
        ax.set_title(f"{model}, batch {batch}", fontsize=mpl.rcParams["axes.labelsize"])
        ax.set_xlabel("sequence length (tokens)" if i == len(models) - 1 else "")
        ax.set_ylabel("median latency (ms)" if j == 0 else "")
        despine(ax)
    if hues:
        # A subtitle per variable (a label without a line), then its values: the colours,
        # then the optimizations' markers and dashes in a dark grey.
        def subtitle(text: str) -> mpl.lines.Line2D:
            return mpl.lines.Line2D([], [], linewidth=0, marker="", label=text)

        handles = [subtitle(hue)]
        handles += [mpl.lines.Line2D([], [], color=palette[name], label=name, **_LINE)
                    for name in hues]
        handles += [subtitle("optimization")]
        handles += [mpl.lines.Line2D([], [], color=".2", label=name, **styles[name], **_LINE)
                    for name in optimizations]
        figure.legend(handles=handles, loc="center right", frameon=False)
    figure.tight_layout(rect=(0, 0, 1 - LEGEND_WIDTH / figure.get_figwidth(), 1))
    return figure


def _heatmap(ax: Axes, values: pd.DataFrame, annot: np.ndarray, cmap: str, norm: Normalize,
             label: str) -> None:
    """A square per value of `values` in the colour of `cmap` (`norm` maps the values onto
    it), the first row on top, with a colour bar labelled `label`; a missing value is left
    blank: the axes' background shows. `annot`, shaped like the values, is written on each
    square with a value, dark on a light colour and white on a dark one."""
    data = np.ma.masked_invalid(values.to_numpy(dtype=float))
    colormap: Colormap = mpl.colormaps[cmap]
    mesh = ax.pcolormesh(data, cmap=colormap, norm=norm, linewidths=0.5, edgecolor="white")
    rows, columns = data.shape
    ax.set(xlim=(0, columns), ylim=(0, rows))
    ax.invert_yaxis()
    colorbar = ax.figure.colorbar(mesh, ax=ax, label=label)
    colorbar.outline.set_linewidth(0)
    ax.set_xticks(np.arange(columns) + 0.5, [str(c) for c in values.columns])
    ax.set_yticks(np.arange(rows) + 0.5, [str(r) for r in values.index], va="center")
    ax.spines[:].set_visible(False)
    rgb = colormap(norm(data.filled(np.nan)))[..., :3]
    rgb = np.where(rgb <= 0.03928, rgb / 12.92, ((rgb + 0.055) / 1.055) ** 2.4)
    luminance = rgb @ [0.2126, 0.7152, 0.0722]  # relative luminance (WCAG)
    for (i, j), text in np.ndenumerate(np.asarray(annot)):
        if not data.mask[i, j]:
            ax.text(j + 0.5, i + 0.5, text, ha="center", va="center",
                    color=".15" if luminance[i, j] > 0.408 else "w")


def _log_colorbar(ax: Axes, limit: float, suffix: str) -> None:
    """Label the colour bar of a log2 heatmap with ratios instead of logarithms, each tick
    at the ratio its label says (two significant digits), each label once (on a narrow
    scale the logarithms' ticks rounded to "1×, 1×, 1.1×, 1.1×")."""
    colorbar = ax.collections[0].colorbar
    ratios = sorted({float(f"{2 ** t:.2g}") for t in colorbar.get_ticks()})
    ratios = [r for r in ratios if abs(math.log2(r)) <= limit]
    colorbar.set_ticks([math.log2(r) for r in ratios], labels=[f"{r:g}{suffix}" for r in ratios])


def speedup_size(panel: Panel) -> tuple[float, float]:
    """A figure size (inches) that fits the panel's heatmap."""
    rows, columns = panel.speedup.shape
    return 1.1 * columns + 4, 0.4 * rows + 1.6


def speedup_heatmap(ax: Axes, panel: Panel, limit: float, several_devices: bool) -> Axes:
    """The speed-ups of a panel on a log2 colour scale of half-width `limit` (green: faster
    than eager), '✗' on a wrong answer, 'N/A' on a cell that did not run; a tie with eager
    (its interval holds 1) is grey and marked '='."""
    tied = panel.tied.to_numpy()
    annot = np.vectorize(lambda v, w: "" if pd.isna(v) else f"{v:.2f}{' ✗' if w else ''}")(
        panel.speedup.to_numpy(), panel.wrong.to_numpy())
    # Centred on no speed-up: as far into the red as into the green.
    _heatmap(ax, np.log2(panel.speedup).mask(panel.tied), annot, "RdYlGn",
             Normalize(-limit, limit), "speed-up over eager (log scale)")
    ax.set_facecolor("#eeeeee")  # the squares without a speed-up, and the ties
    for (i, j), tie in np.ndenumerate(tied):
        if tie:
            ax.text(j + 0.5, i + 0.5, f"= {panel.speedup.iat[i, j]:.2f}"
                    f"{' ✗' if panel.wrong.iat[i, j] else ''}", ha="center", va="center",
                    color=".15")
    for (i, j), ran in np.ndenumerate(panel.timed.to_numpy()):
        if not ran:
            ax.text(j + 0.5, i + 0.5, "N/A", ha="center", va="center", color="#888")
    _log_colorbar(ax, limit, "×")
    ax.set_yticks(np.arange(len(panel.speedup)) + 0.5,
                  [f"{model}, batch {batch}" for model, batch in panel.speedup.index],
                  rotation=0)
    ax.set_xlabel("sequence length (tokens)")
    ax.set_ylabel("")
    name = framework_name(panel.framework)
    where = f" ({panel.device})" if several_devices else ""
    ax.set_title(f"{name} {panel.optimization}{where} vs {name} eager", fontsize=11)
    return ax


def ratio_size(grid: pd.DataFrame) -> tuple[float, float]:
    """A figure size (inches) that fits the ratio heatmap of `grid`."""
    return 1.2 * grid.shape[1] + 3.5, 0.45 * grid.shape[0] + 2


def ratio_heatmap(ax: Axes, grid: pd.DataFrame, verdicts: pd.DataFrame | None = None,
                  precision: str | None = None) -> Axes:
    """Each framework's best over the fastest framework's best (dlbench.analysis.ratio.
    ratio_grid: a row per model, batch and framework) on a log2 colour scale from 1:
    'fastest' where the framework was the fastest of its cell, the redder the slower; a tie
    with the fastest (its interval contains 1) is grey and marked '='. `verdicts` (ratio.
    verdict_grid, shaped like the grid) says which is which; without it, a ratio of 1 is
    the fastest and nothing is a tie."""
    verdicts = (verdicts.reindex_like(grid) if verdicts is not None
                else grid.eq(1.0).replace({True: FASTEST, False: None}))
    tied, fastest = verdicts.eq(TIE), verdicts.eq(FASTEST)
    logs = np.log2(grid)
    limit = max(float(np.nanmax(logs.to_numpy())), 0.1)
    # The fastest and the ties get their own text below; a tie is masked (grey).
    annot = grid.map(lambda v: "" if pd.isna(v) else f"{v:.2f}").mask(tied | fastest, "")
    _heatmap(ax, logs.mask(tied), annot.to_numpy(), "Reds", Normalize(0, limit),
             "best / the fastest framework's best (log scale)")
    ax.set_facecolor("#dddddd")  # ties, and squares without a comparison
    for (i, j), tie in np.ndenumerate(tied.to_numpy()):
        if tie:
            ax.text(j + 0.5, i + 0.5, f"= {grid.iat[i, j]:.2f}", ha="center", va="center")
    for (i, j), first in np.ndenumerate(fastest.to_numpy()):
        if first:
            ax.text(j + 0.5, i + 0.5, FASTEST, ha="center", va="center", fontweight="bold")
    _log_colorbar(ax, limit, "×")
    ax.set_xlabel("sequence length (tokens)")
    ax.set_ylabel("")
    ax.tick_params(axis="y", rotation=0)
    what = f"{precision}: " if precision else ""
    ax.set_title(f"{what}each framework's best against the fastest · grey '=': a tie with it",
                 fontsize=10)
    return ax


def accuracy_curves(curves: pd.DataFrame, ax: Axes) -> Axes:
    """Test accuracy against epoch, one line per cell and seed, coloured by framework:
    curves that lie on each other are frameworks training the same model alike."""
    for (framework, _, _), run in curves.groupby(["framework", "cell", "seed"], sort=False):
        ax.plot(run["epoch"], run["accuracy"], marker="o", markersize=3, alpha=0.7,
                color=framework_color(framework), label=framework)
    handles, labels = ax.get_legend_handles_labels()
    unique = dict(zip(labels, handles, strict=True))
    ax.legend(unique.values(), unique.keys(), frameon=False)
    ax.set_xlabel("epoch")
    ax.set_ylabel("test accuracy")
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:.0%}"))
    ax.set_xticks(sorted(curves["epoch"].unique()))
    ax.grid(True, alpha=0.3)
    return ax


def step_distribution(trained: pd.DataFrame, ax: Axes) -> Axes:
    """Each cell's step times as a box: quartiles, median, whiskers from the fastest step to
    the 99th percentile (from the summary's percentiles)."""
    stats = [{"label": cell, "med": r["median_ms"], "whislo": r["min_ms"],
              "whishi": r["p99_ms"], "fliers": [],
              # Quartiles were recorded from dlbench 0.2 on: older cells get a flat box.
              "q1": r.get("p25_ms", r["median_ms"]), "q3": r.get("p75_ms", r["median_ms"])}
             for cell, r in trained.set_index("cell_id").iterrows()]
    boxes = ax.bxp(stats, orientation="horizontal", patch_artist=True, showfliers=False)
    for box, framework in zip(boxes["boxes"], trained["framework"], strict=True):
        box.set_facecolor(framework_color(framework))
    ax.set_xlabel("time per training step (ms)")
    ax.grid(True, axis="x", alpha=0.3)
    return ax


PART_COLORS = {"waiting for data": "tab:red", "copy to device": "tab:purple",
               "forward + backward": "tab:grey", "optimizer step": "tab:olive",
               "step (not split)": "tab:brown", "rest": "lightgrey"}


def step_parts(parts: pd.DataFrame, ax: Axes) -> Axes:
    """Stacked bars per cell: the mean time per step in each of its parts, waiting for
    the next batch first (dlbench.analysis.training.step_parts)."""
    columns = [c for c in parts if c != "cell"]
    parts.set_index("cell")[columns].plot.barh(
        stacked=True, ax=ax, color=[PART_COLORS.get(c, "tab:blue") for c in columns])
    ax.set_xlabel("mean time per training step (ms)")
    ax.set_ylabel("")
    ax.legend(frameon=False)
    return ax


# The parts of a transformer's training step (dlbench.analysis.train_step.bars).
STEP_SHARE_COLORS = {"forward + loss + backward": "#9ecae1", "optimizer step": "tab:red",
                     "whole step (not separable)": "#cccccc"}


def optimizer_share_size(bars: pd.DataFrame) -> tuple[float, float]:
    """A figure size (inches) that fits the bars of one shape."""
    return 9.0, 0.45 * len(bars) + 1.4


def optimizer_share(ax: Axes, bars: pd.DataFrame, title: str = "") -> Axes:
    """Horizontal bars, one per cell: forward + loss + backward, then the optimizer step
    stacked on it and labelled with its share of the step; a step that is not separable is
    one grey bar of its whole time."""
    y = np.arange(len(bars))
    separable = bars["optimizer_ms"].notna().to_numpy()
    forward = bars["forward_backward_ms"].fillna(0).to_numpy(dtype=float)
    optimizer = bars["optimizer_ms"].fillna(0).to_numpy(dtype=float)
    whole = np.where(separable, 0.0, bars["step_ms"].to_numpy(dtype=float))
    names = list(STEP_SHARE_COLORS)
    ax.barh(y, forward, color=STEP_SHARE_COLORS[names[0]], label=names[0])
    ax.barh(y, optimizer, left=forward, color=STEP_SHARE_COLORS[names[1]], label=names[1])
    if not separable.all():
        ax.barh(y, whole, color=STEP_SHARE_COLORS[names[2]], hatch="//", label=names[2])
    for i in np.flatnonzero(separable):
        share = bars["optimizer_share"].iloc[i]
        ax.text(forward[i] + optimizer[i], i, f" {share:.0%}", va="center", fontsize=8)
    ax.set_yticks(y, bars["label"])
    ax.invert_yaxis()  # the first cell on top
    ax.set_xlabel("median time per step (ms)")
    ax.margins(x=0.12)
    ax.legend(loc="lower right", fontsize=8, frameon=False)
    if title:
        ax.set_title(title, fontsize=11)
    despine(ax)
    return ax


VERDICT_COLORS = {"regression": "tab:red", "improvement": "tab:green",
                  "not significant": "tab:gray"}


def change_size(cells: pd.DataFrame) -> tuple[float, float]:
    """A figure size (inches) that fits the change plot of these compared cells."""
    return 9.0, 0.32 * len(cells) + 1.6


def change_intervals(ax: Axes, cells: pd.DataFrame) -> Axes:
    """New/baseline ratio per compared cell (dlbench.analysis.compare) with its 95%
    interval, on a log scale around 1, coloured by verdict; the first row on top."""
    rows = np.arange(len(cells))[::-1]
    ratio = cells["ratio"].astype(float).to_numpy()
    errors = np.nan_to_num(np.abs(np.vstack([ratio - cells["ratio_low"].astype(float),
                                             cells["ratio_high"].astype(float) - ratio])))
    for i, verdict in enumerate(cells["verdict"]):
        ax.errorbar(ratio[i], rows[i], xerr=errors[:, i:i + 1], fmt="o", capsize=3,
                    color=VERDICT_COLORS.get(verdict, "tab:gray"))
    ax.axvline(1, color="black", linewidth=0.8)
    ax.set_xscale("log")
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    ax.xaxis.set_minor_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    ax.set_yticks(rows, cells["cell_id"])
    ax.set_xlabel("new / baseline time (log scale): above 1 slower, below 1 faster")
    ax.grid(True, axis="x", which="both", alpha=0.3)
    handles = [mpl.lines.Line2D([], [], marker="o", linestyle="", color=color, label=verdict)
               for verdict, color in VERDICT_COLORS.items()]
    ax.legend(handles=handles, loc="lower center", bbox_to_anchor=(0.5, 1.0), ncol=3,
              frameon=False)
    despine(ax)
    return ax
