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
summary = "results/summary.parquet"
peaks = []  # the machine's GEMM peaks: `dlbench peak`'s files (the efficiency section)

# %%
import pandas as pd
from IPython.display import HTML, display

from dlbench.analysis import efficiency, headline
from dlbench.analysis.environment import environment
from dlbench.analysis.startup import grouped, most_startups_at_once, side_by_side
from dlbench.analysis.status import (
    from_elsewhere,
    not_applicable_combinations,
    status_counts,
    untimed,
)
from dlbench.analysis.summary import load, several_devices, timed
from dlbench.format import count, framework_name, md_code, md_text
from dlbench.report.display import say, show
from dlbench.report.page import CONTENTS_ID, anchor

df = load(summary)  # without the cells from elsewhere, unless report.mix_foreign
ok = timed(df)
elsewhere = from_elsewhere(pd.read_parquet(summary))
left_out = int(elsewhere["compared"].eq("no").sum())

# %% [markdown]
# # dlbench report: which framework, with which optimization, is fastest here
#
# **How to read this report.** Each *cell* is one measurement, in its own process: one
# framework running one model on one device with one optimization (for example `eager` or
# `graph`), in one *scenario* — inference (a forward pass, at one batch size and sequence
# length) or training (epochs of training steps, at one batch size, data set, input pipeline
# and optimizer) — each with a section below. The headline numbers are medians over the
# steady state, after warm-up: the latency of a forward pass, in milliseconds, or for
# training the wall time per step (a step fed by loader workers waits for a batch or finds
# one ready, so its median says less than the images over the wall time);
# **lower is better**. The first call or step (compilation, tracing, pipeline start-up) is
# excluded and reported on its own. A cell shown as **N/A** did not produce a timing; the
# brackets give the reason (out of memory, a sequence longer than the model supports, an
# optimization of another framework), and the status section lists every such cell with its
# full reason. Every answer is checked — an inference output against PyTorch eager fp32 on
# the same weights and inputs, a trained model's test accuracy against the other
# frameworks' —: **✗** marks a wrong answer, and a speed-up that came with it does not count.

# %%
display(HTML(f'<nav id="{CONTENTS_ID}"></nav>'))

# %% [markdown]
# ## The answer
#
# For each scenario, model and input size, the fastest framework and optimization among the
# cells whose output was right (a wrong answer never wins), its precision and time, and
# **by how much** it beats the runner-up: the runner-up's time over the fastest's (training:
# the wall time per step) with its 95% interval. Where the cells were measured in rounds
# (the default: each round in fresh processes, the frameworks taking turns), a cell's time
# is its level, the geometric mean of its rounds' medians (training: of their wall times per
# step), and the ratio is paired round by round — a machine that slowed for a minute slowed
# both sides alike —, so that the times shown divide to it; its interval comes from the
# spread between processes pooled over the scenarios ranked by their median (inference,
# generation and train_step together; training's rounds are its seeds); each row says how
# many rounds it rests on. Without rounds, the interval comes from the
# two medians' intervals. A **tie** is an interval that contains 1: the difference is inside
# the measured noise.
# Precisions differ between rows only where the fastest cell ran in a reduced precision: the
# precision column says so. Each framework's **best** is its own fastest right answer
# (optimization, precision, time) and how much slower it is than the fastest, so that every
# framework's standing shows even where the winner and the runner-up are of one framework. A
# recipe is *eager* (op by op) or *compiled* (a trace, a graph, Inductor, XLA); where the
# frameworks' right answers differ in that (one had a compiled recipe, the other eager only),
# **⚠ unequal** says so beside the verdict: the comparison is then of unlike recipes, not of
# the frameworks. The frameworks are compared on the attention they all ran (the explicit
# one by default; PyTorch's `-sdpa` recipes show what SDPA pays in the speed-ups); where
# they share none, **⚠ unequal attention** says so beside the verdict.

# %%
# A cell timed above a physical limit never wins, as a wrong answer never does.
answers = headline.winners(efficiency.with_ceilings(df, peaks), several_devices(df))
widths = headline.width_notes(df)
if not answers:
    say("No cell produced a timing, so there is no answer to give.")
for scenario, answer in answers.items():
    title = scenario.replace("_", " ").capitalize()
    # Text left-aligned (a data set, a pipeline too), numbers and the median right.
    show(answer, f"{title}: the fastest right answer per model and input size",
         left=[c for c in answer.columns
               if not headline.is_time_column(c)
               and not pd.api.types.is_numeric_dtype(answer[c])])
    if widths.get(scenario):
        say(widths[scenario])
    notes = answer[headline.UNEQUAL] if headline.UNEQUAL in answer else pd.Series(dtype=str)
    unequal = int(notes.str.contains("⚠ unequal:", regex=False).sum())
    if unequal:
        say(f"**⚠ {unequal} of {len(answer)} {title.lower()} answers compare unequal "
            "recipes**: one framework's right answers include a compiled recipe, the "
            "other's do not (not configured, failed or wrong). Name each framework's "
            "compiled recipe in the config (e.g. `torchscript`, `graph`) to compare like "
            "with like.")
    unequal = int(notes.str.contains("⚠ unequal attention", regex=False).sum())
    if unequal:
        say(f"**⚠ {unequal} of {len(answer)} {title.lower()} answers compare unequal "
            "attention**: PyTorch's SDPA (its fused attention, which skips a mask of all "
            "ones) against the explicit attention of the other frameworks, not the same "
            "work. Give PyTorch a recipe without `-sdpa` (`eager`, `torchscript`) under "
            "`measurement: {attention: eager}`, the default, to compare like with like.")
    if headline.RESTS_ON in answer:
        resting = int(answer[headline.RESTS_ON].ne("").sum())
        say(f"**⚑ {resting} of {len(answer)} {title.lower()} answers rest on flagged "
            "cells** (busy or noisy machine, unstable, spread between processes, interval "
            "not reached): the verdict may be the machine's, not the frameworks'; measure "
            "again on an idle machine (`measurement.retry_noisy`) before trusting it.")
attention = headline.attention(df, efficiency.count_above_peak(df, peaks))
if attention.empty:
    say(f"All {len(df)} cells ran, none is flagged and none computed a wrong answer.")
else:
    say("Cells that need a look: " + "; ".join(
        f"**{row.cells} {md_text(row.kind)}** ([see {md_text(row.section)}]"
        f"(#{anchor(row.section)}))"
        for row in attention.itertuples()) + ".")

# %%
frameworks = ", ".join(md_text(framework_name(f))
                       for f in sorted(df["framework"].dropna().unique()))
say(f"Summary: {md_code(summary)} — {len(df)} cells, {len(ok)} with timings; "
    f"frameworks: {frameworks or 'none'}."
    + ((f" **⚠ {left_out} more from another machine or dlbench version, left out**"
        if left_out else f" **⚠ {len(elsewhere)} of them from another machine or dlbench "
        "version**") + f" (see [Status overview](#{anchor('Status overview')}))."
       if len(elsewhere) else ""))
# measurement.process: per_group cells share a process with the others of their group;
# side_by_side, those processes of a model's recipes take turns at the CPU.
if (grouped(ok) & ~side_by_side(ok)).any():
    say(f"{int((grouped(ok) & ~side_by_side(ok)).sum())} of the {len(ok)} timed cells were "
        "measured in groups (`measurement.process: per_group`): one process per framework, "
        "model, device and optimization, each cell with its own peak counters and compile "
        "caches.")
if side_by_side(ok).any():
    at_once = most_startups_at_once(ok)
    say(f"{int(side_by_side(ok).sum())} of the {len(ok)} timed cells were measured side by "
        "side (`measurement.process: side_by_side`): one process per framework, model, "
        "device and optimization, each cell with its own peak counters and compile caches, "
        "and every such process of a scenario's model started at once, taking turns at "
        "the CPU: "
        + (f"their start-ups (imports, building the model) up to {at_once} at once, their "
           "compiling, warm-up and checks one at a time, " if at_once > 1 else
           "their start-ups, compiling, warm-up and checks one at a time, ")
        + "their timed loops in alternating half-second slices with nothing beside them.")

# %% [markdown]
# ## Environment

# %%
env = environment(df)
if env is None:
    say("No environment information in the summary.")
elif not env.disagree:
    if env.hosts:
        say(f"Cells ran on {env.hosts} hosts with the same hardware, driver, libraries on "
            "the measured path and precision settings: they are comparable.")
    if env.notes:
        say(f"Differing without affecting comparability: {md_text(', '.join(env.notes))} "
            "(the host, the operating system, Python, dlbench's commit or packages that no "
            "cell's measured path uses; one environment per framework differs there by "
            "design).")
    show(env.table, left=["", "value"])
else:
    say(
        "**⚠ Warning: not all cells are comparable** — they differ in what matters for a "
        f"comparison: {md_text(', '.join(env.disagree))} (the hardware, its driver, the "
        "libraries on a cell's measured path or the precision settings); compare cells "
        "across them with care."
    )
    show(env.table, left=env.table.columns)

# %% [markdown]
# ## Status overview

# %%
if left_out:
    say(f"**⚠ {count(left_out, 'cell')} from elsewhere**: measured on another machine or "
        "by another dlbench version than most of this run's cells (a result copied into "
        "`results/runs/`?). **Left out** of everything below — the answer, the "
        "ratios, the tables and the plots — and listed here; set `report.mix_foreign: "
        "true` to compare them with the rest.")
elif not elsewhere.empty:
    say(f"**⚠ {count(len(elsewhere), 'cell')} from elsewhere, compared with the rest** "
        "(`report.mix_foreign: true`): measured on another machine or by another dlbench "
        "version than most of this run's cells, so a difference may be the machines'.")
if not elsewhere.empty:
    show(elsewhere, "Cells from elsewhere", left=["cell_id", "status", "from", "compared"])

if df.empty:
    say("The summary contains no cells.")
else:
    show(status_counts(df), "Cells per framework and status")

# %%
failed = untimed(df)
by_design = not_applicable_combinations(df)
applicable = len(df) - (int(by_design["cells"].sum()) if not by_design.empty else 0)
if failed.empty and not df.empty:
    say(f"All {applicable} cells that apply ran successfully.")
elif not failed.empty:
    say(f"**{len(failed)} of {len(df)} cells did not produce a timing:**")
    show(failed)
if not by_design.empty:
    say(f"Not applicable by design, and not counted as failures: {int(by_design['cells'].sum())}"
        " cells of a framework with an optimization that only other frameworks have ("
        + ", ".join(f"{md_text(r.framework)} {md_text(r.optimization)}: {r.cells}"
                    for r in by_design.itertuples())
        + "). Name the optimizations per framework in the config to leave them out of the "
        "matrix.")
