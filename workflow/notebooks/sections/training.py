# %% tags=["parameters"]
# The training section of the report: the same CNN trained by each framework from image
# files. This cell lets the section run on its own; in the report, the head's parameters
# replace it.
summary = "results/summary.parquet"
peaks = []  # the machine's GEMM peaks (the report's head has them)

# %%
import matplotlib.pyplot as plt

from dlbench.analysis import bottleneck, efficiency, plots
from dlbench.analysis import training as training_analysis
from dlbench.analysis.summary import load, of_scenario
from dlbench.format import blank_repeats, file_link
from dlbench.report.display import say, show

# A cell above its ceiling counts in no speed-up, as a wrong answer does not.
df = of_scenario(efficiency.with_ceilings(load(summary), peaks), "training")
trained = training_analysis.cells(df)
say("# Training: the same CNN, trained from image files")

# %% [markdown]
# Each framework trains the same convolutional network (the DeepLearningFrameworks CNN: four
# 3×3 convolutions, two dense layers, 3.4M parameters), from the same initial weights, on the
# same PNG files read through its own input pipeline (PyTorch: `Dataset` + `DataLoader` with
# PIL; TensorFlow: `tf.data` with `decode_png`; JAX: Grain with worker processes; `memory`:
# the decoded set as one array), with
# the same augmentation (random crop with padding 4, a horizontal flip where the data set
# allows it — not the digits —, normalisation). A cell
# is timed step by step in the steady state: the first step (compilation, pipeline start-up)
# and the warm-up steps are left out. After every epoch the model is tested with dropout off.
#
# **Accuracy is the proof that the frameworks trained the same model**, not a ranking: the
# final test accuracies of cells that should learn alike (same model, data, batch, optimizer,
# learning rate, its schedule and epochs) at the same precision — a framework's fp32 recipes
# together, each
# reduced precision apart — are compared against the configured tolerance, the size of a
# difference that matters, and the statistical one, the difference's noise at 99% for the
# group as a whole (shared among its pairs): the spread of the trained models (every cell ×
# seed), estimated image by image — from which test images the group's models got wrong, as
# models trained to a plateau get each image wrong independently — or, where the models vary
# as a whole (the seeds' spread beyond what the images allow) or a record lacks the images,
# from the seeds' spread (Student's t at its degrees of freedom); the table says which. A
# **match**
# needs the noise within the configured tolerance (a difference that matters would show)
# and the difference within it; a difference beyond both is a **mismatch**; one inside
# noise wider than the configured tolerance is **undecided** — not the same, not
# different: too few seeds or test images to tell.
# With more than two frameworks, every pair is compared. A **mismatch** names the framework
# that differs where the others agree without it (three frameworks, one off: that one; the
# others keep their verdict); two that disagree, with nothing to tell which is off, are both
# named. A named framework's cells count as wrong answers, as in inference: flagged ✗, their
# speed is left out of the answer, the speed-ups and the efficiency averages.

# %%
if trained.empty:
    say("No training cell ran: nothing to compare.")
else:
    match = training_analysis.accuracy_match(trained)
    if match.empty:
        say("Accuracy cannot be compared: no group of cells has two frameworks or more.")
    else:
        show(training_analysis.match_table(match),
             "Final test accuracy per framework and precision (mean over its seeds)",
             left=["model", "dataset", "optimizer", "verdict"])
        decays = sorted(set(match["training_decay_epochs"]))
        say("The learning rate, in every framework: "
            + " or ".join("constant" if d == 0 else
                          f"falling linearly to zero over the last {d} epoch{'s' * (d > 1)}"
                          for d in decays) + ".")
        counts = match["verdict"].value_counts()
        say(f"{counts.get('match', 0)} of {len(match)} groups match. "
            + (f"{counts.get('mismatch')} mismatch: the named frameworks' cells' speed does "
               "not count. "
               if counts.get("mismatch") else "")
            + (f"{counts.get('undecided')} undecided: their noise (the 99% tolerance) is "
               "wider than the configured tolerance, so a difference that matters would not "
               "show; more seeds, or more epochs where the models still learn, decide them. "
               if counts.get("undecided") else "")
            + ("Groups *not established* differ by more than the configured tolerance, and "
               "the summary lacks the test set's size for the statistical one."
               if counts.get("not established") else ""))

# %% [markdown]
# ## Throughput per framework, optimization and input pipeline
#
# Images per second in the steady state (timed steps × batch over their wall time, waiting
# for the next batch included; at the median step beside it), the step's median, the share of
# it spent **waiting for the input pipeline**, and the speed-up over the framework's eager
# with the same pipeline and optimizer (of the images per second: steps that wait for data
# are bimodal, so the median step can fall in either cluster). Time to target: training time
# (evaluation apart, and the first step's computation, where compilation lands, apart: it
# is cold in a first round and cached in later ones) until the test accuracy first reached the
# configured target; with
# several seeds, their median (a seed that never reached it counts as slowest), then each
# seed's in brackets.

# %%
if not trained.empty:
    show(blank_repeats(training_analysis.throughput_table(trained), "framework"),
         left=["framework", "optimization", "pipeline", "optimizer", "accuracy"])

# %% [markdown]
# ## Where the time goes: a verdict per cell, proved by an ablation
#
# Every step is timed in parts: waiting for the next batch (the pipeline's `next()`), the copy
# to the device, forward + backward, the optimizer step, and the rest. A cell is
# **input-bound** when it waits ≥ 20% of each step for data (TensorFlow's profiler's
# threshold; **partly** from 5%), **compute-bound** on a CPU when its own computation
# dominates (on a GPU: **gpu-bound**, or **host-bound** when the device idles while nothing
# waits for input). The proof: after each epoch, each cell runs the same program fed batches
# of its own pipeline already in device memory — no decoding, no copy — and then undoes those
# steps, so that a machine drifting in speed slows both alike. That is the **ceiling** any
# pipeline could reach, and the pipeline's **efficiency** is the real throughput over it (both
# over wall time); a cell that beats its ceiling is flagged: there the ablation is no ceiling.
# On a CPU the loaders can also slow the step itself by taking its cores: a low efficiency
# with little waiting says so. Beside each verdict, the figures sampled from outside the cell:
# CPU of the training process and of its loader workers, disk reads, and how much of the data
# set was in the page cache when the cell started. A cell flagged busy, noisy or unstable is
# **not decided**: its figures describe the load on the machine, not its pipeline, and no
# advice compares it with another cell — except a cell flagged unstable alone whose waiting
# and ablation both say input-bound: a starved pipeline's steps are uneven by nature (some
# wait for a batch, others find one ready).

# %%
if not trained.empty:
    verdicts = bottleneck.table(trained)
    if verdicts["flame graph"].eq("").all():  # no cell was profiled
        verdicts = verdicts.drop(columns="flame graph")
    else:
        verdicts["flame graph"] = verdicts["flame graph"].map(file_link)
    show(verdicts, "Verdict, its reasons and evidence, the ceiling and what to try next",
         left=[c for c in ("cell", "verdict", "why", "evidence", "try next", "flame graph")
               if c in verdicts], html=[c for c in ("flame graph",) if c in verdicts])
    say("Images/s per framework, optimization and optimizer (rows) and input pipeline "
        "(columns): which knob moved what.")
    show(blank_repeats(bottleneck.pipeline_table(trained), "framework"),
         left=["framework", "optimization", "optimizer"])
    if trained["profiled"].any():
        say("Cells marked *(profiled)* ran under py-spy (sampling from outside, "
            "non-blocking): their timings are not compared with cells that were not.")
    first_epoch = bottleneck.first_epoch_table(trained)
    if not first_epoch.empty:
        say("The first epoch on its own, from its wall time (steps × batch over its "
            "training time): with `cold_cache` it read the evicted files from the disk, and "
            "the steady-state figures above leave its first steps out. A flag says where "
            "eviction did not take (files still in the page cache).")
        show(first_epoch, left=["cell", "first epoch", "flag"])

# %% [markdown]
# ## Accuracy per epoch
#
# Test accuracy after each epoch, one line per cell and seed, a colour per framework: lines
# of every colour lying on each other are the frameworks training the same model alike.

# %%
if not trained.empty:
    curves = training_analysis.curves(trained)
    for key, group in curves.groupby(["optimizer"]):
        fig, ax = plt.subplots(figsize=(7, 3.5))
        plots.accuracy_curves(group, ax)
        ax.set_title(f"optimizer {key[0]}", fontsize=11)
        plt.tight_layout()
        plt.show()

# %% [markdown]
# ## Where a step's time goes, and how steps vary
#
# Left: the mean time per step in each part — waiting for the next batch (red), the copy to
# the device, forward + backward, the optimizer step, the rest. Right: each cell's step
# times, quartiles in the box, from the fastest step to the 99th percentile.

# %%
if not trained.empty:
    height = 0.35 * len(trained) + 1.5
    fig, (left, right) = plt.subplots(1, 2, figsize=(13, height), sharey=False)
    plots.step_parts(training_analysis.step_parts(trained), left)
    plots.step_distribution(trained.sort_values("cell_id"), right)
    right.set_yticklabels([])
    plt.tight_layout()
    plt.show()
