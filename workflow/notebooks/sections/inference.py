# %% tags=["parameters"]
# The inference section of the report: a transformer's forward pass. This cell lets the
# section run on its own; in the report, the head's parameters replace it.
summary = "results/summary.parquet"

# %%
import matplotlib.pyplot as plt

from dlbench.analysis import compilation, correctness, gpu, latency, plots, ratio, speedup
from dlbench.analysis.flags import flagged
from dlbench.analysis.summary import group_keys, load, of_scenario, scenarios, several_devices
from dlbench.analysis.summary import timed as timed_cells
from dlbench.measure.flags import NOISY_STEAL_FRACTION, UNSTABLE_RELATIVE_IQR
from dlbench.report.display import say, show
from dlbench.report.format import blank_repeats, framework_name

everything = load(summary)
df = of_scenario(everything, "inference")
ok = timed_cells(df)
several = several_devices(df)
if len(scenarios(everything)) > 1:
    say("# Inference: a transformer's forward pass")

# %% [markdown]
# ## Median latency per framework (ms)
#
# Laid out like the 2019 HuggingFace transformers benchmark: one row per model and batch size, one
# column per sequence length; each value is the median latency of one forward pass in ms.

# %%
sheets = latency.sheets(df)
if not sheets:
    say("No cells to tabulate.")
for sheet in sheets:
    say(f"### {framework_name(sheet.framework)} — {sheet.optimization}"
        + (f" ({sheet.device})" if several else ""))
    if sheet.not_run:
        count, status, reason = sheet.not_run
        say(f"All {count} cells N/A — {status}: {reason or 'no reason given'}")
    else:
        show(sheet.table, tooltips=sheet.tooltips)
if df["wrong_answer"].any():
    say("✗ the output is outside the tolerance of its precision (a wrong answer): hover for the "
        "error, and see *Correctness* below.")
if "flags_reasons" in df and flagged(df).any():
    say(f"† unstable (IQR above {UNSTABLE_RELATIVE_IQR:.0%} of the median) or measured while "
        f"the host stole more than {NOISY_STEAL_FRACTION:.0%} of the CPU: hover for the "
        "reason, and see *Measurement quality* below.")

# %% [markdown]
# ## Speed-up over eager
#
# Each optimization against its own framework's `eager` (fp32) on the same model, device, batch
# size and sequence length: **eager median / optimization median**, so above 1 (green) the
# optimization is faster. **✗** marks a cell whose output is outside its precision's tolerance
# (see *Correctness*): a speed-up that came with a wrong answer. N/A: the cell did not run (the
# reason is in the status section); an empty square has no eager baseline.

# %%
panels = speedup.panels(df)
if not panels:
    say("No optimization has a timing next to an eager baseline of its framework, so there is "
        "no speed-up to show.")
else:
    limit = speedup.scale(df)
    for panel in panels:
        fig, ax = plt.subplots(figsize=plots.speedup_size(panel))
        plots.speedup_heatmap(ax, panel, limit, several)
        plt.tight_layout()
        plt.show()

# %% [markdown]
# ## Speed, compile time and correctness per optimization
#
# One row per framework, optimization and device, side by side: the **speed-up** over the
# framework's eager (geometric mean over the cells measured with both, and its range); the
# **compile time**, the median over its cells of what the optimization costs before it runs
# fast (see below); and the **largest error** of its output against the reference with the
# tolerance of its precision. An optimization whose cells all could not run is N/A with the
# reason.

# %%
overview, other_framework = speedup.overview(df, several)
if overview.empty:
    say("No cells to summarize.")
else:
    text = ["framework", "optimization", "device", "speed-up over eager", "correctness"]
    show(blank_repeats(overview, "framework"), left=[c for c in text if c in overview])
if other_framework:
    say(f"Left out: {other_framework} combinations of a framework with the other framework's "
        "optimization (N/A by design; the status section lists them).")

# %% [markdown]
# ## Compile, trace and conversion time
#
# What an optimization costs before it runs fast, in seconds, as the median over its cells:
# **prepare** is applying the recipe before the first call (TorchScript's trace; zero where
# compilation waits for the first call), the **first call** includes any compilation
# (torch.compile, tf.function, XLA), and **compile time** is prepare + first call − one
# steady-state call. PyTorch's compile cells start from an empty Inductor cache: a cold
# compilation, as on a fresh machine. The second table gives the compile time per model. In a
# group's process (`per_group`) every cell compiles afresh, but the framework's one-time set-up
# is paid by the first cell only: the later cells' first calls can be shorter.

# %%
if ok.empty:
    say("No cell produced a timing, so there is no compile time to show.")
else:
    show(blank_repeats(compilation.compile_times(ok, several), "framework"))
    show(blank_repeats(compilation.compile_per_model(ok, several), "framework"),
         "Compile time (s) per model, median over cells", left=group_keys(several))

# %% [markdown]
# ## Correctness
#
# Every cell's output (the model's last hidden state) is compared with a reference: **PyTorch
# eager in fp32 on the CPU**, with the same weights (TensorFlow loads PyTorch's) and the same
# token ids, so a difference between the frameworks is a real difference. The relative error is
# max |output − reference| / max |reference|; the tolerance depends on the precision. Worst
# values over each optimization's cells:

# %%
checked = ok[ok["checked"]]
if checked.empty:
    say("No cell was checked against a reference output (run the cells through the workflow, "
        "which makes the references, or give `dlbench run` `--weights` and `--reference`).")
else:
    show(blank_repeats(correctness.errors(ok, several), "framework"),
         left=group_keys(several) + ["precision"])

# %%
wrong = correctness.wrong_answers(ok)
if not checked.empty and wrong.empty:
    say(f"All {len(checked)} checked outputs are within their tolerance.")
elif not wrong.empty:
    faster = int((wrong["speedup"] > 1).sum())
    say(f"**✗ {len(wrong)} cells computed a wrong answer**"
        + (f", {faster} of them faster than eager: those speed-ups do not count." if faster
           else "."))
    show(correctness.wrong_answer_table(wrong),
         "Cells whose output is outside the tolerance of their precision", left=["cell"])

# %% [markdown]
# ## Latency against sequence length
#
# Median latency (ms, log scale) per model (rows) and batch size (columns); colour is the
# framework, marker and line style the optimization. Only cells with a timing are plotted.

# %%
if ok.empty:
    say("No cell produced a timing, so there is nothing to plot.")
else:
    plots.latency_vs_length(ok, plt.figure())
    plt.show()

# %% [markdown]
# ## PyTorch / TensorFlow latency ratio
#
# For each model, device, batch size and sequence length where both frameworks have a timing, the
# ratio is the fastest PyTorch median divided by the fastest TensorFlow median, over the
# optimizations measured whose answer is within tolerance. **A ratio below 1 means PyTorch is
# faster**, above 1 TensorFlow. The brackets name the winning optimization on each side (PyTorch
# vs TensorFlow).

# %%
pairs = ratio.pairs(ok)
if pairs.empty:
    say("The comparison needs both frameworks with a timing for the same model, device, batch "
        "size and sequence length; there is no such pair in this summary.")
else:
    show(ratio.ratio_table(pairs), "PyTorch / TensorFlow median latency")

# %%
if not pairs.empty:
    grid = ratio.ratio_grid(pairs)
    fig, ax = plt.subplots(figsize=plots.ratio_size(grid))
    plots.ratio_heatmap(ax, grid)
    plt.tight_layout()
    plt.show()

# %% [markdown]
# ## GPU: device time and memory
#
# On a GPU every timed iteration waits for its queued work (synchronization), so the **host**
# time includes all of it. PyTorch cells are also timed on the device with CUDA events around
# the same steps (**device** time; TensorFlow exposes no device events to Python, so its cells
# have host time only). Memory: the framework's own peak (PyTorch allocated and reserved,
# TensorFlow's peak from its memory info) and NVML's view of the process; utilization and SM
# clock were sampled by NVML during the timed loop.

# %%
gpu_cells = gpu.gpu_cells(ok)
if gpu_cells.empty:
    say("No GPU cell has a timing in this summary.")
else:
    show(gpu.gpu_table(gpu_cells), "GPU cells: host and device time, memory and utilization",
         left=["cell"])
