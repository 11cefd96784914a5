"""The generation scenario's tables and figures: time to the first token and time per
output token laid out like the 2019 benchmark (rows model × batch, columns prompt length),
the time of each decoding step against its position, tokens/s against batch size, whether
another prompt length compiles anew, and the token-for-token check against the reference.

A wrong answer (fp32 ids that diverged from the reference's) is marked ✗ in every table
and left out of the figures' comparisons; its first divergence is named."""

from dataclasses import dataclass

import pandas as pd

from dlbench.format import na

SCENARIO = "generation"
WRONG_MARK = " ✗"
# The summary columns of the two per-token figures (dlbench.scenarios.generation).
FIRST_TOKEN, PER_TOKEN = "generation_first_token_ms", "generation_per_token_ms"
METRICS = {FIRST_TOKEN: "time to first token", PER_TOKEN: "time per output token"}


@dataclass
class Sheet:
    """One framework and optimization's table of one metric (ms)."""

    framework: str
    optimization: str
    device: str
    new_tokens: int
    table: pd.DataFrame  # index (model, batch), columns prompt length


def _wrong(cells: pd.DataFrame) -> pd.Series:
    if "wrong_answer" in cells:
        return cells["wrong_answer"].fillna(False).astype(bool)
    return pd.Series(False, index=cells.index)


# Why an ok cell has no time per token (dlbench.scenarios.generation.per_token_from_whole).
PER_TOKEN_NOTE = "generation_per_token_note"


# Each process's figure of the two (rounds), beside their geometric mean.
ROUNDS = {metric: metric.replace("generation_", "generation_rounds_") for metric in METRICS}


def _value(row, metric: str) -> str:
    """The metric's figure; in rounds, their range beside it: one process's figure can be
    a framework ahead where the next's is behind."""
    if row["status"] == "ok" and metric == PER_TOKEN and pd.isna(row.get(metric)) \
            and isinstance(row.get(PER_TOKEN_NOTE), str):
        return row[PER_TOKEN_NOTE]  # "not resolved: …", never a negative time
    if row["status"] != "ok" or pd.isna(row.get(metric)):
        return na(row["status"], row.get("reason"))
    mark = WRONG_MARK if bool(row.get("wrong_answer", False)) else ""
    rounds = row.get(ROUNDS[metric])
    spread = f" ({min(rounds):.2f}–{max(rounds):.2f})" if hasattr(rounds, "__len__") \
        and len(rounds) > 1 else ""
    return f"{row[metric]:.2f}{spread}{mark}"


def sheets(cells: pd.DataFrame, metric: str) -> list[Sheet]:
    """Per framework, optimization, device and number of new tokens: rows model × batch,
    columns prompt length, the metric's median in ms (in rounds: the geometric mean of the
    processes' medians, with their range) (✗: a wrong answer; N/A: the cell did not run,
    with its reason)."""
    cells = cells[cells["scenario"].eq(SCENARIO)]
    out = []
    keys = ["framework", "optimization", "device", "new_tokens"]
    for (framework, optimization, device, new), group in cells.groupby(keys, sort=False):
        values = group.assign(value=[_value(r, metric) for _, r in group.iterrows()])
        table = values.pivot_table(index=["model", "batch"], columns="seqlen",
                                   values="value", aggfunc="first")
        table.columns = [f"prompt {c}" for c in table.columns]
        out.append(Sheet(framework, optimization, device, int(new), table))
    return out


def positions(cells: pd.DataFrame) -> pd.DataFrame:
    """Each decoding step's median time (ms) by position, one row per cell and position,
    for the timed cells whose framework exposed every step (right answers only; position
    1 is the second new token, the first after the first token)."""
    column = "generation_per_position_ms"
    if column not in cells:
        return pd.DataFrame(columns=["cell", "framework", "optimization", "model", "batch",
                                     "seqlen", "position", "ms"])
    ok = cells[cells["scenario"].eq(SCENARIO) & cells["status"].eq("ok") & ~_wrong(cells)]
    rows = []
    for _, row in ok.iterrows():
        steps = row[column]
        if steps is None or (not hasattr(steps, "__len__")) or len(steps) == 0:
            continue
        label = f"{row['framework']} {row['optimization']} {row['model']} b{row['batch']} " \
                f"p{row['seqlen']}"
        rows += [{"cell": label, "framework": row["framework"],
                  "optimization": row["optimization"], "model": row["model"],
                  "batch": row["batch"], "seqlen": row["seqlen"], "position": i + 1,
                  "ms": float(ms)} for i, ms in enumerate(steps)]
    return pd.DataFrame(rows, columns=["cell", "framework", "optimization", "model", "batch",
                                       "seqlen", "position", "ms"])


def tokens_per_s(cells: pd.DataFrame) -> pd.DataFrame:
    """Generated tokens per second of every timed cell with a right answer, with its 95%
    interval: framework, optimization, model, prompt length, batch."""
    ok = cells[cells["scenario"].eq(SCENARIO) & cells["status"].eq("ok") & ~_wrong(cells)]
    frame = ok[["framework", "optimization", "model", "seqlen", "new_tokens", "batch",
                "tokens_per_s"]].copy()
    # From the latency's interval as the summary has it (with rounds, the pooled one:
    # dlbench.analysis.summary.intervals_from_rounds), as the record's was made from its own.
    tokens = ok["batch"] * ok["new_tokens"]
    frame["low"] = tokens / (ok["median_ci95_ms_high"] / 1e3)
    frame["high"] = (tokens / (ok["median_ci95_ms_low"] / 1e3)).where(
        ok["median_ci95_ms_low"] > 0)
    return frame.sort_values(["model", "seqlen", "framework", "optimization", "batch"])


def token_check(cells: pd.DataFrame) -> pd.DataFrame:
    """Per timed cell with a check: its precision, the share of generated ids equal to the
    reference's, the first position where they diverged, and the verdict (fp32 judged,
    reduced precisions recorded)."""
    cells = cells[cells["scenario"].eq(SCENARIO) & cells["status"].eq("ok")]
    if "correctness_share_equal" not in cells:
        return pd.DataFrame()
    checked = cells[cells["correctness_share_equal"].notna()]
    rows = []
    for _, row in checked.iterrows():
        first = row.get("correctness_first_divergence")
        judged = bool(row.get("correctness_required"))
        verdict = ("✓ equal" if pd.isna(first) else "✗ diverged") if judged else \
            ("equal" if pd.isna(first) else "diverged (recorded, not judged)")
        rows.append({"framework": row["framework"], "optimization": row["optimization"],
                     "model": row["model"], "batch": int(row["batch"]),
                     "prompt": int(row["seqlen"]), "new tokens": int(row["new_tokens"]),
                     "precision": row.get("precision"),
                     "equal tokens": f"{row['correctness_share_equal']:.1%}",
                     "first divergence": "" if pd.isna(first) else int(first),
                     "verdict": verdict})
    return pd.DataFrame(rows)


def recompilations(cells: pd.DataFrame) -> pd.DataFrame:
    """Per timed cell of a compiled recipe: the prompt length of the one generation made
    after the timed cell with a prompt of another length, whether it compiled anew (and how
    many programs it added, in the framework's own count) and how long that call took."""
    column = "generation_other_prompt_recompiled"
    cells = cells[cells["scenario"].eq(SCENARIO) & cells["status"].eq("ok")]
    if column not in cells:
        return pd.DataFrame()
    asked = cells[cells[column].notna()]
    rows = []
    for _, row in asked.iterrows():
        added = int(row["generation_other_prompt_new_compilations"])
        rows.append({"framework": row["framework"], "optimization": row["optimization"],
                     "model": row["model"], "batch": int(row["batch"]),
                     "prompt": int(row["seqlen"]),
                     "other prompt": int(row["generation_other_prompt_prompt_length"]),
                     "compiled anew": (f"yes ({added})" if bool(row[column]) else "no"),
                     "its call (s)": f"{row['generation_other_prompt_call_s']:.2f}",
                     "counted": row["generation_other_prompt_counted"]})
    return pd.DataFrame(rows)


def plot_positions(frame: pd.DataFrame):
    """Time per output token against its position, one line per cell (a matplotlib
    figure; None without steps)."""
    import matplotlib.pyplot as plt

    if frame.empty:
        return None
    fig, ax = plt.subplots(figsize=(8, 4.5))
    for label, cell in frame.groupby("cell", sort=False):
        ax.plot(cell["position"], cell["ms"], label=label, linewidth=1)
    ax.set_xlabel("position of the new token (1: the second)")
    ax.set_ylabel("decoding step (ms, median)")
    ax.set_title("Time per output token against its position")
    ax.legend(fontsize=7, loc="best")
    fig.tight_layout()
    return fig


def plot_tokens_per_s(frame: pd.DataFrame):
    """Generated tokens/s against batch size with 95% intervals, one line per framework
    and optimization, one panel per model and prompt length (None without cells)."""
    import matplotlib.pyplot as plt

    from dlbench.analysis.plots import log2_axis

    if frame.empty:
        return None
    panels = list(frame.groupby(["model", "seqlen"], sort=False))
    fig, axes = plt.subplots(1, len(panels), figsize=(4.5 * len(panels), 4), squeeze=False)
    for ax, ((model, seqlen), panel) in zip(axes[0], panels, strict=True):
        for (framework, optimization), line in panel.groupby(["framework", "optimization"],
                                                             sort=False):
            line = line.sort_values("batch")
            low = (line["tokens_per_s"] - line["low"]).clip(lower=0).fillna(0)
            high = (line["high"] - line["tokens_per_s"]).clip(lower=0).fillna(0)
            ax.errorbar(line["batch"], line["tokens_per_s"], yerr=[low, high], marker="o",
                        capsize=3, label=f"{framework} {optimization}")
        log2_axis(ax, sorted(int(b) for b in panel["batch"].unique()))
        ax.set_xlabel("batch size")
        ax.set_ylabel("generated tokens/s")
        ax.set_title(f"{model}, prompt {seqlen}")
        ax.legend(fontsize=7)
    fig.tight_layout()
    return fig
