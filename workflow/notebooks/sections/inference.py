# %% tags=["parameters"]
# The inference section of the report: a transformer's forward pass. This cell lets the
# section run on its own; in the report, the head's parameters replace it.
summary = "results/summary.parquet"
peaks = []  # the machine's GEMM peaks (the report's head has them)

# %%
import matplotlib.pyplot as plt

from dlbench.analysis import (
    compilation,
    correctness,
    efficiency,
    gpu,
    latency,
    memory,
    plots,
    plots_size,
    precision,
    ratio,
    rounds,
    scaling,
    speedup,
)
from dlbench.analysis.flags import flagged
from dlbench.analysis.summary import group_keys, load, of_scenario, scenarios, several_devices
from dlbench.analysis.summary import timed as timed_cells
from dlbench.catalogue.precisions import PRECISIONS
from dlbench.format import blank_repeats, framework_name, md_text
from dlbench.report.display import say, show

# A cell above its ceiling counts in no speed-up, as a wrong answer does not.
everything = efficiency.with_ceilings(load(summary), peaks)
df = of_scenario(everything, "inference")
ok = timed_cells(df)
several = several_devices(df)
if len(scenarios(everything)) > 1:
    say("# Inference: a transformer's forward pass")

# %% [markdown]
# ## The rules this report compares by
#
# - **The same arithmetic.** A precision is named, and it is the same in every framework:
#   `fp32` computes float32 matrix products in float32 (TF32, which TensorFlow would use on
#   Ampere or newer GPUs by default, is switched off in every framework and recorded in every
#   cell);
#   `tf32` allows it on purpose. Under `bf16` and `fp16` each framework keeps some ops in
#   float32 by its own rules (torch.autocast's op lists, Keras's mixed-precision policy,
#   the Flax modules' computation dtype):
#   the same name is not the same arithmetic, and the ops are listed below.
# - **The same algorithm, where it can be.** Every framework runs transformers'
#   implementations of each model, not the same kernels. By default PyTorch runs
#   transformers' explicit attention (`measurement.attention: eager`), the one its
#   TensorFlow and Flax classes have; its `-sdpa` recipes run SDPA (a fused kernel): what
#   that pays shows in their speed-up over eager, and the frameworks are compared on the
#   attention they all ran. Within PyTorch every SDPA recipe does the same attention work:
#   an all-ones attention mask is skipped in eager, TorchScript and torch.compile alike.
# - **Right answers only.** A cell whose output is outside its precision's tolerance has
#   no speed-up and takes no part in a comparison; the tables count what they left out.
# - **The same cells on every side.** An optimization's average speed-up is over the cells
#   that every compared optimization measured with a right answer; the frameworks are
#   compared at equal precision.
# - **Differences inside the noise are ties.** Every median has a 95% confidence interval;
#   a ratio's interval comes from the two medians' intervals — or, where the cells were
#   measured in rounds (the default), from the ratio paired round by round, as in the
#   answer — and a ratio whose interval contains 1 is a tie.

# %% [markdown]
# ## Median latency per framework (ms)
#
# Laid out like the 2019 HuggingFace transformers benchmark: one row per model and batch size, one
# column per sequence length; each value is the median latency of one forward pass in ms (in
# rounds, the geometric mean of the rounds' medians, the time the answer ranks by).

# %%
sheets = latency.sheets(df)
if not sheets:
    say("No cells to tabulate.")
for sheet in sheets:
    say(f"### {md_text(framework_name(sheet.framework))} — {md_text(sheet.optimization)}"
        + (f" ({md_text(sheet.device)})" if several else ""))
    if sheet.not_run:
        count, status, reason = sheet.not_run
        say(f"All {count} cells N/A — {md_text(status)}: "
            + md_text(reason or "no reason given"))
    else:
        show(sheet.table, tooltips=sheet.tooltips)
if df["wrong_answer"].any():
    say("✗ the output is outside the tolerance of its precision (a wrong answer): hover for the "
        "error, and see *Correctness* below.")
if "flags_reasons" in df and flagged(df).any():
    # Any flag: *Measurement quality* says what each means, so no list here to drift.
    say("† flagged by the harness: hover for the reason, and see *Measurement quality* "
        "below for what each flag means.")

# %% [markdown]
# ## Speed-up over eager
#
# Each optimization against its own framework's `eager` (fp32) on the same model, device, batch
# size and sequence length: **eager median / optimization median** (in rounds, each one's
# geometric mean over the rounds, as the answer ranks them), so above 1 (green) the
# optimization is faster. A speed-up whose 95% interval holds 1 (paired round by round, as
# the answer's ratios) is a tie with eager: grey, marked **=**. **✗** marks a cell whose
# output is outside its precision's tolerance (see *Correctness*): a speed-up that came with
# a wrong answer. N/A: the cell did not run (the reason is in the status section); an empty
# square has no eager baseline.

# %%
# Ties judged with the spread between processes pooled as the answer pools it.
panels = speedup.panels(df, rounds.run_spreads(timed_cells(everything)))
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
summary_view = speedup.overview(df, several)
overview = summary_view.table
if overview.empty:
    say("No cells to summarize.")
else:
    text = ["framework", "optimization", "device", "speed-up over eager", "correctness"]
    show(blank_repeats(overview, "framework"), left=[c for c in text if c in overview])
    common = sum(len(cells) for cells in summary_view.common.values())
    say(f"The speed-ups are averaged over the {common} cells (model, batch size, length"
        + (", per device" if several else "") + ") that every compared optimization measured "
        "with a right answer; a speed-up that came with a wrong answer is left out and "
        "counted under *wrong answers left out*.")
    if not summary_view.left_out.empty:
        show(summary_view.left_out, "Cells left out of the averages, and the optimizations "
             "without a valid speed-up there", left=["model", "device", "missing"])
if summary_view.other_framework:
    say(f"Left out: {summary_view.other_framework} combinations of a framework with the other "
        "framework's optimization (not applicable by design; the status section counts them).")

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
# **Compiled models: one graph?** A compiled model should be one graph, compiled once: a graph
# break runs part of the step eagerly between graphs, and a recompilation lands a compile
# in the timed loop. Both are counted per cell and a cell with either is flagged *not one
# graph*: for torch.compile by dynamo's counters, for JAX's `jit` by the XLA programs it
# compiled (a second program is a retrace; XLA has no graph breaks). (A compiled generation
# has a graph for its prompt and one for its decoding step, and recompiles once in its
# warm-up, by design: there only graph breaks and recompilations after the warm-up count.)
# On the CPU the compile
# recipes use Inductor's recommended inference settings (frozen weights: constant folding,
# prepacked weights, and the CPU GEMM templates that `compile-max-autotune` chooses among);
# on a GPU, `max-autotune` and `reduce-overhead` replay CUDA graphs, recorded during the
# warm-up (at least two warm-up calls there, whatever `warmup_iterations` says).

# %%
graphs = compilation.graphs(ok)
if graphs is None:
    say("No compiled cell (torch.compile, JAX jit) has a timing in this summary.")
else:
    show(graphs, "Compiled cells: graphs, graph breaks and recompilations",
         left=["cell", "first break reasons"])

# %% [markdown]
# ## Correctness
#
# Every cell's output (the model's last hidden state) is compared with a reference: **PyTorch
# eager in fp32 on the CPU**, with the same weights (TensorFlow and JAX load PyTorch's) and the
# same token ids, so a difference between the frameworks is a real difference. The relative
# error is max |output − reference| / max |reference|; the tolerance depends on the
# precision. Worst values over each optimization's cells:

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
# Median latency (ms, log scale; in rounds the geometric mean of the rounds' medians) per
# model (rows) and batch size (columns); colour is the framework, marker and line style the
# optimization. Only cells with a timing are plotted.

# %%
if ok.empty:
    say("No cell produced a timing, so there is nothing to plot.")
else:
    plots.latency_vs_length(ok, plt.figure())
    plt.show()

# %% [markdown]
# ## Latency against the fastest framework
#
# For each model, device, batch size and sequence length where two or more frameworks have
# a timing **in the same precision** (one table per precision), each framework's best is its
# fastest median over the optimizations it measured whose answer is within tolerance, and
# its ratio is that best divided by the fastest framework's best: **fastest** marks the
# fastest framework of the cell, and 1.60 means 1.6 times its latency. The brackets give the
# ratio's 95% interval: where the cells were measured in rounds, the answer's, paired round
# by round (a cell's time then is its level, the geometric mean of its rounds' medians);
# else from the two medians' intervals (the framework's smallest value over the fastest's
# largest, and the reverse). A ratio whose interval contains 1 is a **tie** with the
# fastest. Then the recipe that won for each framework. The best of more
# candidates is a little lower by chance alone, so the candidates of each framework are
# named, and a second table compares `eager` with `eager`.

# %%
# The spread between processes pooled as the answer pools it (every scenario's cells).
pooled = rounds.run_spreads(timed_cells(everything)).get("inference")
ratios = ratio.against_fastest(ok, pooled=pooled)
if ratios.empty:
    say("The comparison needs two or more frameworks with a timing for the same model, "
        "device, batch size, sequence length and precision; there is no such cell in this "
        "summary.")
else:
    implementations = ratio.attention(ratios)
    if implementations:
        alike = len({tuple(v) for v in implementations.values()}) == 1
        say("Attention: " + "; ".join(f"{md_text(framework_name(f))} ran transformers' "
                                       f"{md_text(', '.join(v))} implementation"
                                       for f, v in implementations.items())
            + (" — the same algorithm, in each framework's own kernels." if alike else
               " — not the same algorithm (give PyTorch a recipe without `-sdpa`, under "
               "`measurement.attention: eager`, the default, for the same one on every "
               "side)."))
    for chosen in ratio.precisions(ratios):
        competed = ratio.candidates(ok, chosen)
        tally = ratio.tally(ratios, chosen)
        say(f"### {md_text(chosen)}: {PRECISIONS[chosen].description}"
            if chosen in PRECISIONS else f"### {md_text(chosen)}")
        say("Candidates: " + "; ".join(f"{md_text(framework_name(f))} {md_text(', '.join(v))}"
                                       for f, v in competed.items())
            + ". Cells: " + ", ".join(f"{n} {md_text(v)}" for v, n in sorted(tally.items()))
            + ".")
        show(ratio.ratio_table(ratios, chosen),
             f"Each framework's best median latency over the fastest's, {chosen} "
             "(95% interval; tie: it holds 1)")
        grid = ratio.ratio_grid(ratios, chosen)
        fig, ax = plt.subplots(figsize=plots.ratio_size(grid))
        plots.ratio_heatmap(ax, grid, ratio.verdict_grid(ratios, chosen), chosen)
        plt.tight_layout()
        plt.show()

# %%
same_recipe = ratio.against_fastest(ok, recipes=["eager"], pooled=pooled)
if not same_recipe.empty:
    for chosen in ratio.precisions(same_recipe):
        show(ratio.ratio_table(same_recipe, chosen),
             f"eager vs eager, {chosen}: the same recipe for every framework (95% interval)")

# %% [markdown]
# ## GPU: device time and memory
#
# On a GPU every timed iteration waits for its queued work (synchronization), so the **host**
# time includes all of it; a framework that exposes device events is also timed on the
# device around the same steps (**device** time). Memory: the framework's own peak and
# NVML's view of the process; utilization and SM clock were sampled by NVML during the timed
# loop. Each framework, as it declares itself:

# %%
say("\n".join(f"- {line}" for line in gpu.how_measured()))
gpu_cells = gpu.gpu_cells(ok)
if gpu_cells.empty:
    say("No GPU cell has a timing in this summary.")
else:
    show(gpu.gpu_table(gpu_cells), "GPU cells: host and device time, memory and utilization",
         left=["cell"])

# %% [markdown]
# ## Memory by phase
#
# A cell's peak host memory includes loading the model (building it, reading the shared
# weights, converting them: TensorFlow and JAX load PyTorch's weights), which says more about
# loading than about inference. So each cell records its memory by phase (MiB, resident
# memory of the measuring process): the **load peak** until the model is ready, the
# **model resident** then, the **first call's peak** (compilation, tracing) and the
# **steady peak** during the timed loop; **steady − model** is what an input of that size
# costs on top of the model. The whole cell's peak is the measuring process's; beside it the
# peak of its process tree, sampled (torch.compile's compile workers: the sum of their
# resident memory, which counts a page they share in each; sampled 100 times a second, it
# can miss a short peak that the process's own counter caught). A cell measured after other
# cells in its process (`measurement.process: per_group`) has no host memory of its own
# here: its process still held what the earlier cells left; in rounds, a cell's figures come
# from a round where it was the first of its process, where there is one. On a GPU the
# same phases come from the framework's allocator, and NVML's view of the process during the
# timed loop beside them (TensorFlow runs with memory growth on, so that NVML does not
# report the whole card).

# %%
phases = memory.memory_table(ok)
if phases is None:
    say("No cell recorded its memory by phase (results measured before dlbench did).")
else:
    show(blank_repeats(memory.load_versus_steady(ok), "framework"),
         "Loading against inference: medians over each optimization's cells (MiB)",
         left=["framework", "optimization"])
    show(phases, "Memory by phase per cell (MiB)",
         left=["framework", "optimization", "model", "device"])
    if borrowed := int((~memory.own_host_memory(ok)).sum()):
        say(f"Not shown: {borrowed} of {len(ok)} cells, measured only after other cells in "
            "their process (it still held what those cells left).")

# %% [markdown]
# ## Memory against input size
#
# The steady peak of host memory (MiB, resident memory of the measuring process during the
# timed loop) per model and input size — batch × sequence length, in tokens — for each
# framework and optimization; **OOM** (a red ✕ in the figure) marks a cell that ran out of
# memory at that size. Then what each 1,000 tokens of input cost: the growth of the steady
# peak over the resident model with batch × length (a least-squares slope over a framework
# and optimization's cells whose memory is their own, with its 95% interval: from three
# sizes up, for a line through two cannot be told from the noise of a process's own
# memory), and the same on the GPU where cells ran there. Growth, not the peak over the
# model divided by the input: that holds a fixed part, the framework's own memory of
# running at all, which is not the input's.

# %%
sized = memory.against_size(df)
if sized is None:
    say("No cell recorded its steady-state memory peak (results measured before dlbench did).")
else:
    show(sized, "Steady peak host memory (MiB) per input size; OOM: out of memory. Each "
         "figure is from a process where its cell came first, so fresh processes' own few "
         "tens of MiB lie between two sizes: the growth per 1,000 tokens below tells them "
         "apart where it can", left=["model"])
    plots_size.memory_vs_size(df, plt.figure())
    plt.show()
    growths = memory.per_token(ok)
    if memory.estimated(growths):
        show(growths, "Memory per 1,000 tokens: the growth of the steady peak over the "
             "resident model with batch × length (MiB; ± its 95% interval; '≤' where the "
             f"interval holds zero, '{memory.FALLS}' where it lies below zero: a measurement "
             "to look at, not a growth)", left=["model", "framework", "optimization"])
    elif growths is not None:
        say("Memory per 1,000 tokens is not estimated: each recipe has at most "
            f"{memory.sizes_of_their_own(ok)} input sizes whose memory is their own (measured "
            "first in a fresh process), and a growth told from the noise of a process's own "
            f"memory needs {memory.MIN_SIZES} (`measurement.process: per_cell`, or more "
            "rounds: each round starts its groups at another size).")
gpu_sized = memory.against_size(df, "device_steady_peak_mb")
if gpu_sized is not None:
    show(gpu_sized, "Steady peak GPU memory (MiB, the framework's allocator) per input size",
         left=["model"])
    plots_size.memory_vs_size(df[df["device"].eq("gpu")], plt.figure(), "device_steady_peak_mb",
                              "steady peak GPU memory (MiB)")
    plt.show()

# %% [markdown]
# ## Throughput against batch size and sequence length
#
# Throughput of the cells with a right answer: **samples per second** (batch / median
# latency; in rounds, the geometric mean of the rounds' medians) against the batch size, and
# **tokens per second** (batch × length / that time) against the sequence length; higher is
# better. Each panel holds the other size at the
# largest value that several sizes were measured at (named in its title). The error bars
# are the 95% confidence interval of each cell's time, carried over to the throughput.

# %%
points = scaling.throughput(ok)
if points.empty:
    say("No cell with a right answer has a timing, so there is no throughput to plot.")
else:
    plots_size.throughput_vs_size(points, plt.figure())
    plt.show()
    show(scaling.table(points), "Samples per second (95% interval)", left=["model"])

# %% [markdown]
# ## Mixed precision: what stays in float32
#
# Under `bf16` and `fp16` each framework decides by its own rules which operations compute
# in the reduced type and which stay in float32, so the same precision's name is not the
# same arithmetic. Each reduced-precision cell records the ops that computed in float32 and
# in the reduced type (views and casts left out). Each framework, as it declares itself:

# %%
say("\n".join(f"- {line}" for line in precision.how_each_framework()))
ops_table = precision.float32_ops(ok)
if ops_table is None:
    say("No bf16 or fp16 cell ran here, so there is no list of float32 ops to show "
        "(a CPU without native bf16/fp16 arithmetic records them as unsupported).")
else:
    show(ops_table, "Ops by the floating-point type they computed in",
         left=["framework", "precision", "in float32", "in the reduced type"])
tf32 = precision.tf32_cells(ok)
if not tf32.empty:
    say(f"**⚠ {len(tf32)} cells allowed TF32 in a precision other than tf32** (results "
        "measured before dlbench set it): " + ", ".join(tf32["cell_id"].head(10)))
