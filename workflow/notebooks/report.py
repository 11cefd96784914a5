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
    ("hostname", "env_hostname"),
    ("CPU", "env_cpu_model"),
    ("logical CPUs", "env_logical_cpus"),
    ("RAM (GiB)", "env_ram_gib"),
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
# such cell with its full reason.

# %%
frameworks = ", ".join(name(f) for f in sorted(df["framework"].dropna().unique()))
say(f"Summary: `{summary}` — {len(df)} cells, {len(ok)} with timings; "
    f"frameworks: {frameworks or 'none'}.")

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
    text = [
        fmt_ms(r.median_ms) if t else na(r.status, r.reason)
        for t, r in zip(timed, cells.itertuples())
    ]
    full = ["" if t else f"{r.status}: {r.reason or 'no reason given'}"
            for t, r in zip(timed, cells.itertuples())]
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
# optimizations measured. **A ratio below 1 means PyTorch is faster**, above 1 TensorFlow. The
# brackets name the winning optimization on each side (PyTorch vs TensorFlow).

# %%
keys = ["model", "device", "batch", "seqlen"]
best = ok.loc[ok.groupby(keys + ["framework"])["median_ms"].idxmin()] if not ok.empty else ok
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
# the cold call itself.

# %%
phases = {
    "imports_done_s": "imports done (s)",
    "model_ready_s": "model ready (s)",
    "first_timed_iteration_s": "first timed iteration (s)",
    "cold_start_s": "cold call (s)",
}
present = [c for c in phases if c in ok]
if ok.empty or not present:
    say("No cell produced a timing, so there is no start-up cost to show.")
else:
    startup = ok.groupby(["framework", "optimization"])[present].median()
    startup.insert(0, "cells", ok.groupby(["framework", "optimization"]).size())
    startup = startup.rename(columns=phases).reset_index()
    startup["framework"] = startup["framework"].map(name)
    startup = blank_repeats(startup, "framework")
    for column in startup.columns[3:]:
        startup[column] = startup[column].map(lambda v: "—" if pd.isna(v) else f"{v:.2f}")
    show(startup)
