# %% tags=["parameters"]
# Efficiency against the machine's limit, for the cells of every scenario with a FLOP
# count. This cell lets the section run on its own; in the report, the head's parameters
# replace it.
summary = "results/summary.parquet"
peaks = []

# %%
import matplotlib.pyplot as plt

from dlbench.analysis import efficiency, roofline
from dlbench.analysis.summary import load, scenarios, several_devices
from dlbench.report.display import say, show
from dlbench.report.format import blank_repeats

everything = load(summary)
machine = efficiency.load_peaks(peaks)
cells = efficiency.efficiency(everything, machine)
several = several_devices(cells)
if len(scenarios(everything)) > 1:  # the first common section: out of the last scenario's
    say("# Every scenario")

# %% [markdown]
# ## Efficiency against the machine's limit
#
# How much of what the hardware can do each cell used. A cell's **work** is the
# floating-point operations of one timed iteration, counted from the architecture (one
# multiply-add is 2 FLOPs; the matrix products of the attention projections, the
# feed-forward layers and the attention scores, or the CNN's convolutions and dense layers;
# not the embeddings, softmax, layer norms or activations): a forward pass for inference, a
# training step — 3 forward passes: forward and backward — for training. **Achieved
# GFLOP/s** is that work over the median time. The **peak** is this machine's: a short
# multiplication of large square matrices in PyTorch, on the same device, in the same
# precision and with the same threads as the cell (`dlbench peak`, measured once and kept
# in `results/peak/`). **% of peak** is achieved over peak: the share of the machine's best
# matrix-product speed that the whole model reached, copies, softmax and framework
# overhead included — small inputs leave most of it unused. The peak is a median over about
# 1.5 s: other work on the machine while it ran lowers it (its file records the load before
# and after), and a share above 100% says the peak was measured on a busier machine.

# %%
if cells.empty:
    say("No timed cell with a FLOP count (inference, training or train_step): no "
        "efficiency to show.")
else:
    if machine.empty:
        say("No peak was measured (`dlbench report` was given no `--peaks`): the achieved "
            "FLOP/s have no ceiling.")
    show(blank_repeats(efficiency.by_optimization(cells, several), "scenario"),
         "Per optimization: the share of the peak its cells reached (right answers only)")
    moved = efficiency.other_hardware(cells)
    if moved:
        say(f"**⚠ {moved} cells ran on other hardware than their peak was measured on**: "
            "their % of peak compares two machines.")

# %%
if not cells.empty:
    fig, ax = plt.subplots(figsize=(9, 4.5))
    roofline.roofline(ax, cells, machine)
    ax.set_title("Achieved GFLOP/s against the work per iteration; the lines are the "
                 "measured peaks", fontsize="medium")
    plt.tight_layout()
    plt.show()
    show(efficiency.table(cells, several), "Every timed cell: its work, its rate and the "
         "share of the peak (✗: a wrong answer)")
