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

# %%
import math

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns
from IPython.display import Markdown, display
from matplotlib.ticker import FuncFormatter, NullLocator

NAMES = {"pytorch": "PyTorch", "tensorflow": "TensorFlow"}
COLORS = {"PyTorch": "tab:blue", "TensorFlow": "tab:orange"}  # the same in every report
STATUSES = ["ok", "oom", "unsupported", "error"]
TEXT_COLUMNS = {"cell_id", "status", "reason", "model", "framework", "optimization",
                "model, batch", ""}
# (label, columns) of the environment table; git commit and dirty flag are merged.
ENV_FIELDS = [
    ("fingerprint", "env_fingerprint"),
    ("hostname", "env_hostname"),
    ("CPU", "env_cpu_model"),
    ("logical CPUs", "env_logical_cpus"),
    ("RAM (GiB)", "env_ram_gib"),
    ("CPU governor", "env_cpu_governor"),
    ("GPU", "env_gpu"),
    ("OS", "env_os"),
    ("Python", "env_python"),
    ("torch", "env_torch"),
    ("tensorflow", "env_tensorflow"),
    ("transformers", "env_transformers"),
    ("git commit", "git"),
]


def say(text):
    """Render a line of Markdown as output."""
    display(Markdown(text))


def name(framework):
    return NAMES.get(framework, framework)


def fmt_ms(value):
    """3 significant digits, no scientific notation; '' for NaN."""
    if value is None or not np.isfinite(value):
        return ""
    decimals = max(0, 2 - math.floor(math.log10(abs(value)))) if value else 0
    return f"{value:,.{decimals}f}"


def na(status, reason, width=40):
    """'N/A (<short reason>)' for a cell that did not produce a timing."""
    text = "out of memory" if status == "oom" else (reason or status)
    text = " ".join(str(text).split())
    if len(text) > width:
        text = text[: width - 1].rstrip() + "…"
    return f"N/A ({text})"


def show(frame, caption=None, tooltips=None, left=None):
    """A clean HTML table: no index, text columns left-aligned, N/A cells greyed out.

    tooltips: a frame shaped like `frame` whose strings appear on hover (e.g. full reasons).
    left: the columns to left-align (default: the known text columns).
    """
    styler = (
        frame.style.hide(axis="index")
        .map(lambda v: "color: #888; font-style: italic" if str(v).startswith("N/A") else "")
        .set_table_styles([
            {"selector": "th", "props": "text-align: center; padding: 4px 10px;"},
            {"selector": "td", "props": "padding: 4px 10px;"},
            {"selector": "caption", "props": "caption-side: top; text-align: left; color: #555;"},
        ])
    )
    left = [c for c in frame.columns if c in TEXT_COLUMNS] if left is None else list(left)
    right = [c for c in frame.columns if c not in left]
    for subset, align in ((left, "left"), (right, "right")):
        if subset:
            styler = styler.set_properties(subset=subset, **{"text-align": align})
    if tooltips is not None:
        styler = styler.set_tooltips(tooltips, props="visibility: hidden; position: absolute; "
                                     "z-index: 1; background: #333; color: #fff; padding: 4px;")
    if caption:
        styler = styler.set_caption(caption)
    display(styler)


def blank_repeats(frame, column):
    """Show a value only on its first row of a run, like a merged spreadsheet cell."""
    frame = frame.copy()
    values = frame[column].astype(object)
    frame[column] = values.where(values.ne(values.shift()), "")
    return frame


# %%
df = pd.read_parquet(summary)
for column in ["cell_id", "framework", "model", "device", "batch", "seqlen", "optimization",
               "status", "reason", "median_ms"]:
    if column not in df:  # robust to a summary written by an older aggregate
        df[column] = pd.NA if column != "median_ms" else np.nan
ok = df[df["status"].eq("ok") & df["median_ms"].notna()]  # the cells with a timing
several_devices = df["device"].nunique() > 1

# %%
# Speed-up over eager and correctness, per cell (NaN where an older summary lacks them).
for column in ["median_ms", "prepare_s", "cold_start_s", "compile_s", "correctness_max_abs_error",
               "correctness_max_rel_error", "correctness_tolerance"]:
    if column not in df:
        df[column] = np.nan
for column in ["correctness_within_tolerance", "correctness_precision"]:
    if column not in df:
        df[column] = pd.NA
# A wrong answer: a checked output outside its precision's tolerance (unchecked: not wrong).
df["wrong_answer"] = [v is not None and not pd.isna(v) and not bool(v)
                      for v in df["correctness_within_tolerance"]]
df["checked"] = df["correctness_within_tolerance"].notna()
BASELINE_KEYS = ["framework", "model", "device", "batch", "seqlen"]
_timed = df["status"].eq("ok") & df["median_ms"].notna()
_eager = df[_timed & df["optimization"].eq("eager")].set_index(BASELINE_KEYS)["median_ms"]
df["eager_ms"] = df.join(_eager.rename("eager_ms"), on=BASELINE_KEYS)["eager_ms"].where(_timed)
df["speedup"] = df["eager_ms"] / df["median_ms"]  # > 1: faster than its framework's eager
ok = df[_timed]  # the cells with a timing, with the new columns


def fmt_s(value):
    """Seconds: two decimals, '<0.01' below; '' for NaN."""
    if value is None or pd.isna(value):
        return ""
    return "<0.01" if value < 0.005 else f"{value:,.2f}"


def fmt_error(value):
    return "" if value is None or pd.isna(value) else f"{value:.1e}"


def error_note(row):
    """'max rel error 1.2e-02 > tolerance 1.0e-04' for a wrong answer, else ''."""
    if not row.wrong_answer:
        return ""
    if row.correctness_max_rel_error is None or pd.isna(row.correctness_max_rel_error):
        return "wrong answer: the output is not finite"
    return (f"wrong answer: max rel error {fmt_error(row.correctness_max_rel_error)} > "
            f"tolerance {fmt_error(row.correctness_tolerance)}")

# %% [markdown]
# # dlbench report: PyTorch vs TensorFlow inference latency
#
# **How to read this report.** Each *cell* is one measurement: one framework running one model on
# one device, with one batch size, one sequence length and one optimization (for example `eager`
# or `graph`), in its own process. The headline number is the **median latency per forward pass
# in milliseconds** over the timed loop, after warm-up; **lower is better**. The first call
# (compilation, tracing) is excluded from it and reported separately as the start-up cost at the
# end. A cell shown as **N/A** did not produce a timing; the brackets give the reason (for example
# out of memory, or a sequence longer than the model supports), and the status section lists every
# such cell with its full reason. Every cell's output is also checked against a reference (PyTorch
# eager, fp32, CPU, the same weights and inputs): **✗** marks an answer outside the tolerance of
# its precision, and a speed-up that came with it does not count.

# %%
frameworks = ", ".join(name(f) for f in sorted(df["framework"].dropna().unique()))
say(f"Summary: `{summary}` — {len(df)} cells, {len(ok)} with timings; "
    f"frameworks: {frameworks or 'none'}.")
# measurement.process: per_group cells share a process with the others of their group.
grouped = ok["process_cells"].gt(1) if "process_cells" in ok else pd.Series(False, ok.index)
first_in_process = ok["process_position"].fillna(0).eq(0) if "process_position" in ok \
    else pd.Series(True, ok.index)
if grouped.any():
    say(f"{int(grouped.sum())} of the {len(ok)} timed cells were measured in groups "
        "(`measurement.process: per_group`): one process per framework, model, device and "
        "optimization, each cell with its own peak counters and compile caches.")

# %% [markdown]
# ## Environment

# %%
env = pd.DataFrame(index=df.index)
for label, column in ENV_FIELDS:
    if column == "git":
        commit = df.get("env_git_commit", pd.Series(pd.NA, index=df.index)).astype(object)
        dirty = df.get("env_git_dirty", pd.Series(pd.NA, index=df.index)).astype(object)
        env[label] = [
            None if pd.isna(c) else f"{str(c)[:12]}{' (dirty)' if d is True else ''}"
            for c, d in zip(commit, dirty)
        ]
    elif column in df:
        env[label] = df[column].astype(object)

if env.empty or env.columns.empty:
    say("No environment information in the summary.")
else:
    # A field disagrees only when it has several distinct known values (a framework's own
    # environment may simply lack the other framework's version).
    distinct = {label: env[label].dropna().astype(str).unique() for label in env}
    disagree = [label for label, values in distinct.items() if len(values) > 1]
    if len(distinct.get("fingerprint", [])) == 1 and set(disagree) <= {"hostname"}:
        # Same hardware and software on several hosts: comparable, say so and list them.
        if disagree:
            say(f"Cells ran on {len(distinct['hostname'])} hosts with one fingerprint "
                "(the same hardware and software): they are comparable.")
        disagree = []
    if not disagree:
        values = [", ".join(v) if len(v) else "—" for v in distinct.values()]
        show(pd.DataFrame({"": list(distinct), "value": values}), left=["", "value"])
    else:
        say(
            "**⚠ Warning: the results come from different environments** "
            f"(differing: {', '.join(disagree)}); compare cells across them with care."
        )
        combos = env.assign(framework=df["framework"].map(name)).astype(str).replace(
            {"None": "—", "nan": "—", "<NA>": "—"}
        )
        combos = combos.groupby(list(combos.columns), dropna=False).size().reset_index(name="cells")
        show(combos, left=combos.columns)

# %% [markdown]
# ## Status overview

# %%
if df.empty:
    say("The summary contains no cells.")
else:
    counts = pd.crosstab(df["framework"].map(name), df["status"])
    counts = counts.reindex(columns=STATUSES + sorted(set(counts.columns) - set(STATUSES)),
                            fill_value=0)
    counts.loc["total"] = counts.sum()
    counts["total"] = counts.sum(axis=1)
    show(counts.rename_axis(None, axis=1).reset_index(names="framework"),
         "Cells per framework and status")

# %%
failed = df[df["status"].ne("ok")].sort_values(["status", "cell_id"])
if failed.empty and not df.empty:
    say(f"All {len(df)} cells ran successfully.")
elif not failed.empty:
    say(f"**{len(failed)} of {len(df)} cells did not produce a timing:**")
    show(failed[["cell_id", "status", "reason"]].fillna("—"))

# %% [markdown]
# ## Median latency per framework (ms)
#
# Laid out like the 2019 HuggingFace transformers benchmark: one row per model and batch size, one
# column per sequence length; each value is the median latency of one forward pass in ms.

# %%
def flagged_cells(cells):
    """Cells whose timing is unstable or was taken while the host stole CPU time."""
    flags = [cells.get(c, pd.Series(False, index=cells.index)) for c in
             ("flags_unstable", "flags_noisy_machine")]
    return (flags[0].fillna(False).astype(bool) | flags[1].fillna(False).astype(bool)).tolist()


def spreadsheet(cells, values):
    """Rows (model, batch), columns seqlen, cells the strings in `values`."""
    table = cells.assign(value=values).pivot_table(
        index=["model", "batch"], columns="seqlen", values="value", aggfunc="first"
    )
    table = table.sort_index(axis=1).fillna("—")  # "—": not part of the matrix
    table.columns = [f"seqlen {s}" for s in table.columns]
    return blank_repeats(table.reset_index(), "model")


def show_latency(cells):
    """The spreadsheet of median latencies; hovering an N/A shows its full reason."""
    timed = cells["status"].eq("ok") & cells["median_ms"].notna()
    flagged = flagged_cells(cells)
    text = [
        (fmt_ms(r.median_ms) + (" †" if f else "") + (" ✗" if r.wrong_answer else ""))
        if t else na(r.status, r.reason)
        for t, f, r in zip(timed, flagged, cells.itertuples())
    ]
    full = [" · ".join(filter(None, [r.flags_reasons if f else "", error_note(r)])) if t
            else f"{r.status}: {r.reason or 'no reason given'}"
            for t, f, r in zip(timed, flagged, cells.itertuples())]
    tips = spreadsheet(cells, full).replace("—", "")
    tips[["model", "batch"]] = ""
    show(spreadsheet(cells, text), tooltips=tips)


groups = df.dropna(subset=["framework"]).groupby(
    ["framework", "optimization", "device"], dropna=False, sort=True
)
if not groups.ngroups:
    say("No cells to tabulate.")
for (framework, optimization, device), cells in groups:
    heading = f"### {name(framework)} — {optimization}"
    if several_devices:
        heading += f" ({device})"
    say(heading)
    reasons = cells[["status", "reason"]].fillna("").drop_duplicates()
    if len(cells) > 1 and len(reasons) == 1 and reasons["status"].iloc[0] != "ok":
        status, reason = reasons.iloc[0]
        say(f"All {len(cells)} cells N/A — {status}: {reason or 'no reason given'}")
    else:
        show_latency(cells)
if df["wrong_answer"].any():
    say("✗ the output is outside the tolerance of its precision (a wrong answer): hover for the "
        "error, and see *Correctness* below.")
if "flags_reasons" in df and any(flagged_cells(df)):
    say("† unstable (IQR above 10% of the median) or measured while the host stole more than "
        "5% of the CPU: hover for the reason, and see *Measurement quality* below.")

# %% [markdown]
# ## Measurement quality
#
# Every cell keeps all its per-iteration times. A cell is flagged **unstable** when the spread
# of its iterations (IQR) is above 10% of its median, and **noisy machine** when the host stole
# more than 5% of the CPU time during its timed loop (shared virtual machines lose CPU to their
# host, and latencies rise with it): re-run just those cells. The supervising process sampled
# the cell's CPU use and the machine's load at ~100 Hz while it ran.

# %%
if ok.empty or "relative_iqr" not in ok:
    say("No cell produced a timing, so there is no measurement quality to show.")
else:
    quality = ok.assign(
        flagged=flagged_cells(ok),
        ci=[f"{fmt_ms(lo)} – {fmt_ms(hi)}" for lo, hi in
            zip(ok.get("median_ci95_ms_low", np.nan), ok.get("median_ci95_ms_high", np.nan))],
    )
    columns = {"cell_id": "cell", "median_ms": "median ms", "ci": "95% CI of the median",
               "relative_iqr": "IQR / median", "iterations": "iterations",
               "utilization_process_cpu_cores_mean": "cores used",
               "utilization_other_load_cores": "other load (cores)",
               "utilization_steal_fraction": "stolen", "between_processes_cv":
               "CV between processes", "flags_reasons": "flag"}
    columns = {k: v for k, v in columns.items() if k in quality}
    bad = quality[quality["flagged"]]
    if bad.empty:
        say(f"None of the {len(ok)} timed cells is flagged.")
    else:
        say(f"**{len(bad)} of {len(ok)} timed cells are flagged:**")
    table = (bad if not bad.empty else quality).sort_values("relative_iqr", ascending=False)
    table = table[list(columns)].rename(columns=columns).head(30)
    for column in ("IQR / median", "stolen", "CV between processes"):
        if column in table:
            table[column] = table[column].map(lambda v: "" if pd.isna(v) else f"{v:.1%}")
    for column in ("cores used", "other load (cores)"):
        if column in table:
            table[column] = table[column].map(lambda v: "" if pd.isna(v) else f"{v:.2f}")
    table["median ms"] = table["median ms"].map(fmt_ms)
    show(table, "Flagged cells" if not bad.empty else "The least stable timed cells first",
         left=["cell", "flag"])

# %% [markdown]
# ## Speed-up over eager
#
# Each optimization against its own framework's `eager` (fp32) on the same model, device, batch
# size and sequence length: **eager median / optimization median**, so above 1 (green) the
# optimization is faster. **✗** marks a cell whose output is outside its precision's tolerance
# (see *Correctness*): a speed-up that came with a wrong answer. N/A: the cell did not run (the
# reason is in the status section); an empty square has no eager baseline.

# %%
speed = ok[ok["optimization"].ne("eager") & ok["speedup"].notna()]
if speed.empty:
    say("No optimization has a timing next to an eager baseline of its framework, so there is "
        "no speed-up to show.")
else:
    logs = np.log2(speed["speedup"].astype(float))
    limit = max(float(np.nanmax(np.abs(logs))), np.log2(1.5))
    panels = speed.groupby(["framework", "optimization", "device"], sort=True).groups
    for framework, optimization, device in panels:
        # Every cell of the panel, so that a cell that did not run is an empty square (N/A).
        cells = df[df["framework"].eq(framework) & df["optimization"].eq(optimization)
                   & df["device"].eq(device)]
        index = pd.MultiIndex.from_frame(cells[["model", "batch"]].drop_duplicates()
                                         .sort_values(["model", "batch"]))
        columns = sorted(cells["seqlen"].unique())
        ratio = cells.pivot_table(index=["model", "batch"], columns="seqlen", values="speedup",
                                  aggfunc="first", dropna=False)
        ratio = ratio.reindex(index=index, columns=columns).astype(float)
        wrong = cells.pivot_table(index=["model", "batch"], columns="seqlen",
                                  values="wrong_answer", aggfunc="first")
        wrong = wrong.reindex(index=index, columns=columns).fillna(False).astype(bool)
        timed = cells.assign(timed=cells["status"].eq("ok")).pivot_table(
            index=["model", "batch"], columns="seqlen", values="timed", aggfunc="first")
        timed = timed.reindex(index=index, columns=columns).fillna(False).astype(bool)
        annot = np.vectorize(lambda v, w: "" if pd.isna(v) else f"{v:.2f}{' ✗' if w else ''}")(
            ratio.to_numpy(), wrong.to_numpy())
        fig, ax = plt.subplots(figsize=(1.1 * ratio.shape[1] + 4, 0.4 * ratio.shape[0] + 1.6))
        sns.heatmap(np.log2(ratio), ax=ax, cmap="RdYlGn", center=0,
                    vmin=-limit, vmax=limit, annot=annot, fmt="", linewidths=0.5,
                    cbar_kws={"label": "speed-up over eager (log scale)"})
        ax.set_facecolor("#eeeeee")  # the squares without a speed-up
        for (i, j), ran in np.ndenumerate(timed.to_numpy()):
            if not ran:
                ax.text(j + 0.5, i + 0.5, "N/A", ha="center", va="center", color="#888")
        colorbar = ax.collections[0].colorbar
        ticks = [t for t in colorbar.get_ticks() if abs(t) <= limit]
        colorbar.set_ticks(ticks, labels=[f"{2 ** t:.2g}×" for t in ticks])
        ax.set_yticks(np.arange(len(ratio)) + 0.5,
                      [f"{model}, batch {batch}" for model, batch in ratio.index], rotation=0)
        ax.set_xlabel("sequence length (tokens)")
        ax.set_ylabel("")
        where = f" ({device})" if several_devices else ""
        ax.set_title(f"{name(framework)} {optimization}{where} vs {name(framework)} eager",
                     fontsize=11)
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
def geomean(values):
    values = values.dropna().astype(float)
    return float(np.exp(np.log(values).mean())) if len(values) else np.nan


def verdict(cells):
    checked = cells[cells["checked"]]
    if checked.empty:
        return "not checked"
    wrong = int(checked["wrong_answer"].sum())
    if wrong:
        return f"✗ {wrong} of {len(checked)} outside tolerance"
    return f"✓ all {len(checked)} within tolerance"


overview = []
other_framework = 0
for (framework, optimization, device), cells in df.dropna(subset=["framework"]).groupby(
        ["framework", "optimization", "device"], sort=True):
    timed = cells[cells["status"].eq("ok") & cells["median_ms"].notna()]
    if timed.empty and cells["reason"].fillna("").str.contains("does not exist in").all():
        other_framework += 1  # the other framework's recipe: N/A by design
        continue
    row = {"framework": name(framework), "optimization": optimization}
    if several_devices:
        row["device"] = device
    if timed.empty:
        status, reason = cells[["status", "reason"]].fillna("").iloc[0]
        row.update({"cells": f"0 of {len(cells)}",
                    "speed-up over eager": na(status, reason, width=70)})
        overview.append(row)
        continue
    ratios = timed["speedup"].dropna()
    if optimization == "eager":
        speedup = "1 (the baseline)"
    elif ratios.empty:
        speedup = "— (no eager baseline)"
    else:
        speedup = f"{geomean(ratios):.2f}× ({ratios.min():.2f}–{ratios.max():.2f})"
    row.update({
        "cells": f"{len(timed)} of {len(cells)}",
        "speed-up over eager": speedup,
        "compile time (s)": fmt_s(timed["compile_s"].median()),
        "max rel error": fmt_error(timed["correctness_max_rel_error"].max()),
        "tolerance": fmt_error(timed["correctness_tolerance"].max()),
        "correctness": verdict(timed),
    })
    overview.append(row)
if overview:
    table = pd.DataFrame(overview).fillna("")
    text = ["framework", "optimization", "device", "speed-up over eager", "correctness"]
    show(blank_repeats(table, "framework"), left=[c for c in text if c in table])
else:
    say("No cells to summarize.")
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
    keys = ["framework", "optimization"] + (["device"] if several_devices else [])
    compile_table = ok.groupby(keys).agg(
        cells=("cell_id", "size"), prepare=("prepare_s", "median"),
        first=("cold_start_s", "median"), compile=("compile_s", "median"),
        slowest=("compile_s", "max"),
    ).reset_index()
    compile_table["framework"] = compile_table["framework"].map(name)
    for column in ("prepare", "first", "compile", "slowest"):
        compile_table[column] = compile_table[column].map(fmt_s)
    compile_table = compile_table.rename(columns={
        "prepare": "prepare (s)", "first": "first call (s)", "compile": "compile time (s)",
        "slowest": "slowest cell (s)"})
    show(blank_repeats(compile_table, "framework"))
    per_model = ok.pivot_table(index=keys, columns="model", values="compile_s",
                               aggfunc="median")
    per_model = per_model.map(fmt_s).reset_index()
    per_model["framework"] = per_model["framework"].map(name)
    per_model.columns.name = None
    show(blank_repeats(per_model, "framework"), "Compile time (s) per model, median over cells",
         left=keys)

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
    keys = ["framework", "optimization"] + (["device"] if several_devices else [])
    errors = checked.groupby(keys).agg(
        precision=("correctness_precision", "first"), cells=("cell_id", "size"),
        abs_error=("correctness_max_abs_error", "max"),
        rel_error=("correctness_max_rel_error", "max"),
        tolerance=("correctness_tolerance", "max"), wrong=("wrong_answer", "sum"),
    ).reset_index()
    errors["framework"] = errors["framework"].map(name)
    for column in ("abs_error", "rel_error", "tolerance"):
        errors[column] = errors[column].map(fmt_error)
    errors["wrong"] = [f"✗ {int(w)}" if w else "0" for w in errors["wrong"]]
    errors = errors.rename(columns={"abs_error": "max abs error", "rel_error": "max rel error",
                                    "wrong": "outside tolerance"})
    show(blank_repeats(errors, "framework"), left=keys + ["precision"])

# %%
wrong = ok[ok["wrong_answer"]].sort_values("speedup", ascending=False)
if not checked.empty and wrong.empty:
    say(f"All {len(checked)} checked outputs are within their tolerance.")
elif not wrong.empty:
    faster = int((wrong["speedup"] > 1).sum())
    say(f"**✗ {len(wrong)} cells computed a wrong answer**"
        + (f", {faster} of them faster than eager: those speed-ups do not count." if faster
           else "."))
    table = pd.DataFrame({
        "cell": wrong["cell_id"],
        "speed-up over eager": wrong["speedup"].map(
            lambda v: "—" if pd.isna(v) else f"{v:.2f}×"),
        "median ms": wrong["median_ms"].map(fmt_ms),
        "max abs error": wrong["correctness_max_abs_error"].map(fmt_error),
        "max rel error": wrong["correctness_max_rel_error"].map(fmt_error),
        "tolerance": wrong["correctness_tolerance"].map(fmt_error),
    })
    show(table, "Cells whose output is outside the tolerance of their precision", left=["cell"])

# %% [markdown]
# ## Latency against sequence length
#
# Median latency (ms, log scale) per model (rows) and batch size (columns); colour is the
# framework, marker and line style the optimization. Only cells with a timing are plotted.

# %%
if ok.empty:
    say("No cell produced a timing, so there is nothing to plot.")
else:
    data = ok.assign(framework=ok["framework"].map(name))
    hue, palette = "framework", None
    if set(data["framework"]) <= set(COLORS):
        palette = COLORS
    if ok["device"].nunique() > 1:
        palette = None
        hue = "framework (device)"
        data[hue] = data["framework"] + " (" + data["device"] + ")"
    grid = sns.relplot(
        data=data.sort_values("seqlen"), x="seqlen", y="median_ms",
        hue=hue, palette=palette, style="optimization", row="model", col="batch",
        kind="line", markers=True, dashes=True, markersize=8, errorbar=None,
        height=3, aspect=1.4,
    )
    seqlens = sorted(data["seqlen"].unique())
    for ax in grid.axes.flat:
        ax.set_yscale("log")
        ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
        ax.set_xscale("log", base=2)
        ax.set_xticks(seqlens, [str(s) for s in seqlens])
        ax.xaxis.set_minor_locator(NullLocator())
        ax.grid(True, which="major", alpha=0.3)
    grid.set_axis_labels("sequence length (tokens)", "median latency (ms)")
    grid.set_titles("{row_name}, batch {col_name}")
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
keys = ["model", "device", "batch", "seqlen"]
right = ok[~ok["wrong_answer"]]  # a wrong answer is no contender
best = right.loc[right.groupby(keys + ["framework"])["median_ms"].idxmin()] if not right.empty \
    else right
pairs = pd.DataFrame()
if {"pytorch", "tensorflow"} <= set(best["framework"]):
    pt = best[best["framework"] == "pytorch"].set_index(keys)
    tf = best[best["framework"] == "tensorflow"].set_index(keys)
    pairs = pd.merge(
        pt[["median_ms", "optimization"]], tf[["median_ms", "optimization"]],
        left_index=True, right_index=True, suffixes=("_pt", "_tf"),
    ).reset_index()
if pairs.empty:
    say("The comparison needs both frameworks with a timing for the same model, device, batch "
        "size and sequence length; there is no such pair in this summary.")
else:
    pairs["ratio"] = pairs["median_ms_pt"] / pairs["median_ms_tf"]
    pairs["label"] = pairs["model"] + ", batch " + pairs["batch"].astype(str)
    if pairs["device"].nunique() > 1:
        pairs["label"] += " (" + pairs["device"] + ")"
    pairs["text"] = [
        f"{r.ratio:.2f} ({r.optimization_pt} vs {r.optimization_tf})" for r in pairs.itertuples()
    ]
    table = pairs.pivot_table(index="label", columns="seqlen", values="text", aggfunc="first")
    table = table.sort_index(axis=1).fillna("—")
    table.columns = [f"seqlen {s}" for s in table.columns]
    show(table.reset_index(names="model, batch"), "PyTorch / TensorFlow median latency")

# %%
if not pairs.empty:
    ratios = pairs.pivot_table(index="label", columns="seqlen", values="ratio", aggfunc="first")
    ratios = ratios.sort_index(axis=1)
    logs = np.log2(ratios)
    limit = max(float(np.nanmax(np.abs(logs.to_numpy()))), 0.1)
    fig, ax = plt.subplots(figsize=(1.2 * ratios.shape[1] + 3.5, 0.45 * ratios.shape[0] + 2))
    sns.heatmap(
        logs, ax=ax, cmap="coolwarm", center=0, vmin=-limit, vmax=limit,
        annot=ratios.map(lambda v: "" if pd.isna(v) else f"{v:.2f}").to_numpy(), fmt="",
        linewidths=0.5, cbar_kws={"label": "PyTorch / TensorFlow (log scale)"},
    )
    colorbar = ax.collections[0].colorbar
    ticks = [t for t in colorbar.get_ticks() if abs(t) <= limit]  # log2 → ratio labels
    colorbar.set_ticks(ticks, labels=[f"{2 ** t:.2g}" for t in ticks])
    ax.set_xlabel("sequence length (tokens)")
    ax.set_ylabel("")
    ax.tick_params(axis="y", rotation=0)
    ax.set_title("blue: PyTorch faster · red: TensorFlow faster", fontsize=10)
    plt.tight_layout()
    plt.show()

# %% [markdown]
# ## Start-up cost
#
# Every cell pays a fixed cost before its timed loop: importing the framework, building the model,
# and the first (cold) call, which includes compilation or tracing. The times below are seconds
# since process start at each phase (medians over the cells with a timing), and the duration of
# the cold call itself. Cells measured later in a group's process (`per_group`) paid no import
# and found the framework set up, so only the first cell of each process counts here.

# %%
phases = {
    "imports_done_s": "imports done (s)",
    "model_ready_s": "model ready (s)",
    "first_timed_iteration_s": "first timed iteration (s)",
    "cold_start_s": "cold call (s)",
}
present = [c for c in phases if c in ok]
fresh = ok[first_in_process]
if fresh.empty or not present:
    say("No cell produced a timing, so there is no start-up cost to show.")
else:
    startup = fresh.groupby(["framework", "optimization"])[present].median()
    startup.insert(0, "cells", fresh.groupby(["framework", "optimization"]).size())
    startup = startup.rename(columns=phases).reset_index()
    startup["framework"] = startup["framework"].map(name)
    startup = blank_repeats(startup, "framework")
    for column in startup.columns[3:]:
        startup[column] = startup[column].map(lambda v: "—" if pd.isna(v) else f"{v:.2f}")
    show(startup)

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
gpu = ok[ok["device"].eq("gpu")]
if gpu.empty:
    say("No GPU cell has a timing in this summary.")
else:
    columns = {"cell_id": "cell", "median_ms": "host median ms",
               "device_time_median_ms": "device median ms",
               "device_allocated_peak_mb": "allocated peak MiB",
               "device_reserved_peak_mb": "reserved peak MiB",
               "utilization_gpu_process_memory_peak_mb": "NVML process MiB",
               "utilization_gpu_utilization_mean": "GPU busy %",
               "utilization_sm_clock_mhz_mean": "SM clock MHz"}
    table = gpu[[c for c in columns if c in gpu]].rename(columns=columns)
    for column in table.columns[1:]:
        table[column] = table[column].map(
            lambda v: "—" if pd.isna(v) else (fmt_ms(v) if "ms" in column else f"{v:,.0f}"))
    show(table, "GPU cells: host and device time, memory and utilization", left=["cell"])
