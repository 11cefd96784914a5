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
from dlbench.format import blank_repeats
from dlbench.report.display import say, show

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
# GFLOP/s** is that work over the median time (for training, over the wall time per step:
# the images over the wall time). The **peak** is this machine's limit, measured as one: per
# device, precision and thread count of the cells, the matrix product of every library the
# frameworks use — PyTorch's default `F.linear`, what `nn.Linear` calls (MKL on the CPU,
# cuBLAS on a GPU), oneDNN through PyTorch (CPU), TensorFlow's `tf.matmul` in a
# `tf.function`, JAX's `jnp.matmul` under `jax.jit` — each in a process of its own, measured
# when no other work runs on its cores, at a few sizes where the product is bound by
# arithmetic, taking each library's best batch (`dlbench peak`, measured once and kept in
# `results/peak/`). The peak is the best library, named below; each framework's **own GEMM**
# is the product its layers run (for PyTorch on the CPU MKL's sgemm, in eager, traced and
# compiled cells alike; oneDNN's in its onednn cells), so that a gap between the frameworks
# that is a gap between their libraries shows. A library that did not get the cores of its
# threads is measured again; one that never did is listed as busy and is no ceiling. Where
# the CPU tells its vector width, FMA units and clock, the theoretical figure stands beside
# it with its assumptions (a virtual machine shows only its host's nominal clock: the cores
# may run faster than that figure says). **% of peak** is achieved over peak: the share of
# the machine's best
# matrix-product speed that the whole model reached, copies, softmax and framework overhead
# included — small inputs leave most of it unused. A cell above 100% of the peak or of its
# own GEMM is a measurement problem — its time, its FLOP count or the ceiling is wrong —: it
# is flagged with its numbers below, and it never wins the answer, as a wrong answer never
# does.

# %%
if cells.empty:
    say("No timed cell with a FLOP count (inference, training or train_step): no "
        "efficiency to show.")
else:
    if machine.empty:
        say("No peak was measured (`dlbench report` was given no `--peaks`): the achieved "
            "FLOP/s have no ceiling.")
    else:
        show(efficiency.libraries(peaks), "The machine's limit: every library's matrix "
             "product, best first, and the theoretical figure")
        for line in efficiency.theory(peaks):
            say(line)
    above = efficiency.above_peak(cells)
    if not above.empty:
        say(f"**⚠ {len(above)} cells are above the measured peak or their own framework's "
            "matrix product: a measurement problem** (the cell's time, its FLOP count or the "
            "ceiling is wrong), not a faster machine; they are left out of the answer and of "
            "the averages below.")
        show(above, "Cells above the machine's measured peak or their own GEMM")
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
    show(efficiency.table(cells, several), "Every timed cell: its work, its rate, the "
         "share of the peak and of its framework's own GEMM (✗: a wrong answer; ⚠: above "
         "the peak)")

# %%
phased = efficiency.phases(cells) if not cells.empty else None
if phased is not None and not phased.empty:
    say("Generation's phases apart: the prefill (the prompt's forward pass and the first "
        "token, timed as the time to the first token) and the decoding step (one token per "
        "row against the key-value cache, timed as the time per output token; its FLOPs grow "
        "with the cache). A decoding step does little arithmetic per weight read, so its "
        "share of a matrix product's peak is small: at best it is bound by memory, not by "
        "arithmetic, and where the framework runs the loop step by step from Python, often "
        "by that (on an H100, PyTorch eager's 5 ms a DistilGPT-2 token read its weights at "
        "under 2% of the memory's bandwidth).")
    show(phased.drop(columns=["gflops"]), "The phases of a timed iteration: work, rate and "
         "share of the peak (✗: a wrong answer)")
