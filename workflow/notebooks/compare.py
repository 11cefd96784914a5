# ---
# jupyter:
#   jupytext:
#     text_representation:
#       extension: .py
#       format_name: percent
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% tags=["parameters"]
baseline = "baseline/results"
new = "results"
floor = None  # dlbench compare --floor; None: its default (analysis.compare.DRIFT_FLOOR)

# %%
import matplotlib.pyplot as plt

from dlbench.analysis import plots
from dlbench.analysis.compare import NOT_COMPARED, readable
from dlbench.format import count, md_code
from dlbench.report.compare import comparison as compared_sets
from dlbench.report.display import say, show

comparison = compared_sets(baseline, new, floor)
cells = comparison.cells

# %% [markdown]
# # dlbench compare: a baseline and a new result set
#
# **How to read this page.** Each row is one *cell* that both result sets measured (the same
# framework, model, device, optimization and sizes). *new/baseline* is the ratio of the two
# times, the figure the report ranks cells by (the column *time* says which): the medians,
# or for training the wall time per step: **above 1 the new set is slower**, below 1 it is
# faster, with a 95% interval.
# What that interval covers depends on how the sets were measured (the line below says
# which, and the column *interval covers* says it per cell):
#
# - **one after the other** (two runs at different times): the interval of each time
#   (within its one process, or between its processes with `measurement.repeats`), widened
#   by a *drift floor*, because two runs of identical code minutes apart differ by more than
#   any interval of one run sees. Where both sides have several processes, a Mann-Whitney U
#   test on the processes' figures must also give p < 0.05. The iterations of one process
#   are never tested against another's.
# - **interleaved** (`dlbench compare --interleave`: the two sides' processes alternated,
#   A B B A …): a paired t-interval of the rounds' ratios, which covers the spread between
#   processes and the machine's drift.
#
# A change is a **regression** or an **improvement** only if the interval excludes 1 (and
# the test, where there is one, agrees); anything else is **not significant** — inside the
# measured noise.

# %%
say(f"Baseline: {md_code(comparison.baseline)}; new: {md_code(comparison.new)}. "
    f"{comparison.headline()}; "
    f"{len(comparison.only_baseline)} only in the baseline, "
    f"{len(comparison.only_new)} only in the new set.")
say(f"**What the intervals cover:** {comparison.rule()}.")
if comparison.sees():
    say(f"**What it can see:** {comparison.sees()}.")
if not comparison.elsewhere.empty:
    left_out = int(comparison.elsewhere["compared"].eq("no").sum())
    say(f"**⚠ {count(len(comparison.elsewhere), 'cell')} from elsewhere**: measured on "
        "another machine or by another dlbench version than most of its set's cells"
        + (f"; {left_out} of them left out of the comparison" if left_out else "")
        + " (`report.mix_foreign`).")
    show(comparison.elsewhere[["set", "cell_id", "status", "from", "compared"]],
         left=["set", "cell_id", "status", "from", "compared"])
if not comparison.environment.empty:
    say("**⚠ Warning: the two sets ran in environments that differ in what matters for a "
        "comparison** (the hardware, its driver, the libraries on a cell's measured path or "
        "the precision settings): a change may come from these, not from what you changed.")
    show(comparison.environment, left=["field", "baseline", "new"])

# %% [markdown]
# ## Changes, regressions first

# %%
compared = cells[cells["verdict"].ne(NOT_COMPARED)]
if compared.empty:
    say("No cell is ok in both sets: nothing to compare.")
else:
    show(readable(compared), left=["verdict", "cell", "time", "status"])
    fig, ax = plt.subplots(figsize=plots.change_size(compared))
    plots.change_intervals(ax, compared)
    plt.tight_layout()
    plt.show()

# %% [markdown]
# ## Cells not compared

# %%
skipped = cells[cells["verdict"].eq(NOT_COMPARED)]
if skipped.empty:
    say("Every cell that both sets hold was ok in both.")
else:
    say("Cells that both sets hold but that are not ok (timed) in both:")
    show(readable(skipped)[["cell", "status"]], left=["cell", "status"])
for name, alone in (("the baseline", comparison.only_baseline),
                    ("the new set", comparison.only_new)):
    if not alone.empty:
        say(f"**{len(alone)} cells only in {name}:**")
        show(alone, left=["cell_id", "status"])
