"""The roofline-style figure of the efficiency section: achieved FLOP/s against the work
of one iteration, the measured GEMM peaks (the best library's) as horizontal ceilings."""

import pandas as pd
from matplotlib.axes import Axes
from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

from dlbench.analysis.plots import framework_color
from dlbench.format import framework_name

MARKERS = "osD^vP*Xhp<>"
_CEILING_STYLES = ["-", "--", ":", "-."]


def roofline(ax: Axes, cells: pd.DataFrame, peaks: pd.DataFrame) -> None:
    """One point per cell of `efficiency`: GFLOP per iteration (x, log) against achieved
    GFLOP/s (y, log); colour the framework, marker the optimization (with its precision
    and device where several); a horizontal line per ok peak of the cells' devices and
    precisions, labelled with its figure and library. A bigger problem fills the machine
    better: the points climb towards the ceiling from left to right."""
    several = cells["device"].nunique() > 1
    labels = cells["optimization"] + (" (" + cells["device"] + ")" if several else "")
    for marker, label in zip(MARKERS * 4, sorted(labels.unique()), strict=False):
        for framework, points in cells[labels.eq(label)].groupby("framework"):
            name = framework_name(framework)
            ax.scatter(points["flops"] / 1e9, points["achieved_gflops"], marker=marker,
                       color=framework_color(name), label=f"{name} {label}", alpha=0.8, s=40)
    used = peaks[peaks["status"].eq("ok")
                 & peaks.set_index(["device", "precision"]).index.isin(
                     cells.set_index(["device", "precision"]).index)]
    for style, (_, peak) in zip(_CEILING_STYLES * 4, used.iterrows(), strict=False):
        ax.axhline(peak["peak_gflops"], color="black", linestyle=style, linewidth=1,
                   label=f"peak {peak['device']} {peak['precision']} ×{peak['threads']} "
                         f"threads: {peak['peak_gflops']:,.0f} GFLOP/s"
                         + (f"\n({peak['peak_library']})" if peak.get("peak_library")
                            else ""))
    ax.set_xscale("log")
    ax.set_yscale("log")
    for axis in (ax.xaxis, ax.yaxis):  # 0.5, 1, 2, 5, 10: plain numbers, no 10^x
        axis.set_major_locator(LogLocator(subs=(1.0, 2.0, 5.0)))
        axis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
        axis.set_minor_formatter(NullFormatter())
    ax.set_xlabel("work per iteration (GFLOP)")
    ax.set_ylabel("achieved GFLOP/s")
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(loc="center left", bbox_to_anchor=(1.02, 0.5), frameon=False, fontsize="small")
