"""PyTorch against TensorFlow, like with like: per precision, the fastest right answer of
each framework per model, device, batch size and sequence length, the ratio of their
medians with its 95% interval (from the two medians' intervals: dlbench.analysis.
uncertainty), and a tie where that interval contains 1.

Comparing at equal precision keeps a PyTorch bf16 cell from being set against a TensorFlow
fp32 one. Each side's best is taken over the recipes it measured (PyTorch usually has more
of them, which favours it a little: the minimum of more noisy candidates is lower), so the
table names the recipe that won on each side and how many competed, and `pairs(…,
recipes=["eager"])` gives the same-recipe comparison.
"""

import pandas as pd

from dlbench.analysis.uncertainty import TIE, ratio_interval, verdict

KEYS = ["model", "device", "batch", "seqlen"]
PYTORCH_FASTER, TENSORFLOW_FASTER = "PyTorch faster", "TensorFlow faster"


def best_per_framework(timed: pd.DataFrame) -> pd.DataFrame:
    """Per KEYS, precision and framework, the timed cell with the smallest median among
    those whose answer is not wrong (a wrong answer is no contender), with `candidates`:
    how many recipes competed."""
    right = timed[~timed["wrong_answer"]]
    if right.empty:
        return right.assign(candidates=pd.Series(dtype=int))
    groups = right.groupby(KEYS + ["precision", "framework"])
    best = right.loc[groups["median_ms"].idxmin()]
    return best.assign(candidates=groups["median_ms"].transform("size").loc[best.index])


def pairs(timed: pd.DataFrame, recipes: list[str] | None = None) -> pd.DataFrame:
    """One row per KEYS and precision where both frameworks have a best cell (among
    `recipes`' cells only, if given): each side's median and interval (`_pt`, `_tf`), its
    winning optimization and number of candidates, the attention implementation; `ratio`
    (PyTorch / TensorFlow: below 1, PyTorch is faster) with `ratio_low`/`ratio_high`;
    `verdict` (PyTorch faster, TensorFlow faster, tie, or None without intervals); a row
    label 'model, batch n (device)' and the cell text. Empty when no pair exists."""
    if recipes is not None:
        recipe = timed.get("optimization_recipe", timed["optimization"]).fillna(
            timed["optimization"])
        timed = timed[recipe.isin(recipes) | timed["optimization"].isin(recipes)]
    best = best_per_framework(timed)
    if not {"pytorch", "tensorflow"} <= set(best["framework"]):
        return pd.DataFrame()
    columns = ["median_ms", "median_ci95_ms_low", "median_ci95_ms_high", "optimization",
               "candidates"]
    if "attention_implementation" in best:
        columns.append("attention_implementation")
    index = KEYS + ["precision"]
    pt = best[best["framework"] == "pytorch"].set_index(index)[columns]
    tf = best[best["framework"] == "tensorflow"].set_index(index)[columns]
    result = pd.merge(pt, tf, left_index=True, right_index=True,
                      suffixes=("_pt", "_tf")).reset_index()
    if result.empty:
        return pd.DataFrame()
    result["ratio"], result["ratio_low"], result["ratio_high"] = ratio_interval(
        result["median_ms_pt"], result["median_ci95_ms_low_pt"],
        result["median_ci95_ms_high_pt"], result["median_ms_tf"],
        result["median_ci95_ms_low_tf"], result["median_ci95_ms_high_tf"])
    result["verdict"] = [verdict(lo, hi, PYTORCH_FASTER, TENSORFLOW_FASTER)
                         for lo, hi in zip(result["ratio_low"], result["ratio_high"],
                                           strict=True)]
    result["label"] = result["model"] + ", batch " + result["batch"].astype(str)
    if result["device"].nunique() > 1:
        result["label"] += " (" + result["device"] + ")"
    result["text"] = [_text(r) for r in result.itertuples()]
    return result


def _text(row) -> str:
    """'0.62 (0.58–0.66) compile vs graph', with 'tie: ' first where the interval holds 1."""
    interval = "" if pd.isna(row.ratio_low) else f" ({row.ratio_low:.2f}–{row.ratio_high:.2f})"
    tie = "tie: " if row.verdict == TIE else ""
    return f"{tie}{row.ratio:.2f}{interval} {row.optimization_pt} vs {row.optimization_tf}"


def precisions(pairs: pd.DataFrame) -> list[str]:
    """The precisions with a pair, fp32 first."""
    found = set(pairs["precision"]) if not pairs.empty else set()
    order = ["fp32", "tf32", "bf16", "fp16"]
    return [p for p in order if p in found] + sorted(found - set(order))


def ratio_table(pairs: pd.DataFrame, precision: str = "fp32") -> pd.DataFrame:
    """The pairs' texts of one precision: rows 'model, batch', columns 'seqlen <n>', '—'
    where no pair."""
    chosen = pairs[pairs["precision"] == precision]
    table = chosen.pivot_table(index="label", columns="seqlen", values="text", aggfunc="first")
    table = table.sort_index(axis=1).fillna("—")
    table.columns = [f"seqlen {s}" for s in table.columns]
    return table.reset_index(names="model, batch")


def ratio_grid(pairs: pd.DataFrame, precision: str = "fp32") -> pd.DataFrame:
    """The ratios of one precision as numbers: rows the pairs' labels, columns sequence
    lengths."""
    chosen = pairs[pairs["precision"] == precision]
    grid = chosen.pivot_table(index="label", columns="seqlen", values="ratio", aggfunc="first")
    return grid.sort_index(axis=1)


def ties(pairs: pd.DataFrame, precision: str = "fp32") -> pd.DataFrame:
    """Which pairs of one precision are ties (rows and columns as in ratio_grid)."""
    chosen = pairs[pairs["precision"] == precision].assign(tie=lambda p: p["verdict"] == TIE)
    grid = chosen.pivot_table(index="label", columns="seqlen", values="tie", aggfunc="first")
    return grid.sort_index(axis=1).fillna(False).astype(bool)


def tally(pairs: pd.DataFrame, precision: str = "fp32") -> dict[str, int]:
    """How many pairs of one precision each verdict has (None: no interval)."""
    chosen = pairs[pairs["precision"] == precision]
    return chosen["verdict"].fillna("no interval").value_counts().to_dict()


def candidates(timed: pd.DataFrame, precision: str = "fp32") -> dict[str, list[str]]:
    """Per framework, the optimizations of one precision that competed (right answers)."""
    right = timed[~timed["wrong_answer"] & timed["precision"].eq(precision)]
    return {fw: sorted(cells["optimization"].unique())
            for fw, cells in right.groupby("framework")}


def attention(pairs: pd.DataFrame) -> dict[str, list[str]]:
    """Per framework, the attention implementations of the paired cells."""
    found = {}
    for side, framework in (("pt", "pytorch"), ("tf", "tensorflow")):
        column = f"attention_implementation_{side}"
        if column in pairs:
            found[framework] = sorted(pairs[column].dropna().unique())
    return found
