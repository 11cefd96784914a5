# %% tags=["parameters"]
# The train_step section of the report: a transformer's training step. This cell lets the
# section run on its own; in the report, the head's parameters replace it.
summary = "results/summary.parquet"

# %%
import matplotlib.pyplot as plt

from dlbench.analysis import plots, train_step
from dlbench.analysis.summary import load, of_scenario, several_devices
from dlbench.format import blank_repeats, fmt_percent, framework_name, md_code, md_text
from dlbench.report.display import say, show

everything = load(summary)
df = of_scenario(everything, "train_step")
several = several_devices(df)

# %% [markdown]
# # Training steps: forward, loss, backward and the optimizer step
#
# A transformer of the registry, with the same seeded weights in every framework, trained on a
# tied language-model head: logits = last hidden state × word embeddingsᵀ, cross-entropy against
# the input token ids. Each step is timed in two parts, each followed by the device's
# synchronization: **forward + loss + backward**, then the **optimizer step** (SGD with momentum
# 0.9, or Adam; epsilon 1e-7 added to √v̂ in every framework), and as a whole; the first step
# (compilation) and the warm-up are left out. TensorFlow runs the two parts as two functions
# (gradients, then `apply_gradients`), so that the optimizer step can be timed on its own;
# `compile-step` compiles PyTorch's whole step, whose parts are then not separable. Before
# training, each cell checks its loss (dropout off) against the same loss computed from the
# reference output (PyTorch eager, fp32, CPU).

# %% [markdown]
# ## Step time per framework, optimization and optimizer
#
# Medians per step in ms; the speed-up is over the same framework's `eager` with the same
# optimizer and shape. N/A: the cell did not run (the reason is in the status section).

# %%
table, by_design = train_step.step_table(df, several)
if table.empty:
    say("No training-step cells to tabulate.")
else:
    text = ["model", "optimizer", "framework", "optimization", "device",
            "initial loss vs reference"]
    show(blank_repeats(table, "model"), left=[c for c in text if c in table])
if by_design:
    say(f"Left out: {by_design} cells of a framework with an optimization that only other "
        "frameworks have "
        "(not applicable by design; the status section counts them).")
wrong = df[df["wrong_answer"]]
if not wrong.empty:
    say(f"**✗ {len(wrong)} cells' initial loss is outside the tolerance of their precision**: "
        "their frameworks did not compute the same function, and their timings do not count.")

# %% [markdown]
# ## The optimizer's share of the step
#
# Each bar is one cell: forward + loss + backward, then the optimizer step stacked on it, labelled
# with its share of the step (the sum of its times over the sum of the steps'). A step compiled
# as a whole (`compile-step`) is one grey bar.

# %%
shapes = train_step.bars(df)
if not shapes:
    say("No training-step cell has a timing, so there is nothing to plot.")
for (model, device, batch, seqlen), bars in shapes.items():
    fig, ax = plt.subplots(figsize=plots.optimizer_share_size(bars))
    where = f", {device}" if several else ""
    plots.optimizer_share(ax, bars, f"{model}, batch {batch}, length {seqlen}{where}")
    plt.tight_layout()
    plt.show()

# %%
shares = train_step.share_table(df, several)
if not shares.empty:
    show(blank_repeats(shares, "framework"),
         "The optimizer step per framework and optimization: medians over the cells",
         left=[c for c in ("framework", "optimization", "device") if c in shares])

# %% [markdown]
# ## "PyTorch's Adam is Python, TensorFlow's is C++: why is PyTorch not slower?"

# %%
answer = train_step.seed_answer(df)
if not answer:
    say("The answer needs Adam cells of two frameworks whose steps are separable (not "
        "`compile-step`); this summary has none.")
for line in answer:
    say(line)
costs = train_step.optimizer_costs(df)
if not costs.empty:
    worst = costs.loc[costs["optimizer_share"].idxmax()]
    say(f"The largest optimizer share here: {fmt_percent(worst.optimizer_share)}, "
        f"{md_text(framework_name(worst.framework))} {md_code(worst.optimization)} with "
        f"{md_text(worst.optimizer)}. "
        "The update's cost depends on the parameters only, while forward and backward grow "
        "with the tokens per step: the share is largest at small batches and short "
        "sequences.")
