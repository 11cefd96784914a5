"""PyTorch against TensorFlow: the fastest right answer of each framework per model,
device, batch size and sequence length, and the ratio of their medians."""

import pandas as pd

KEYS = ["model", "device", "batch", "seqlen"]


def best_per_framework(timed: pd.DataFrame) -> pd.DataFrame:
    """Per KEYS and framework, the timed cell with the smallest median among those whose
    answer is not wrong (a wrong answer is no contender)."""
    right = timed[~timed["wrong_answer"]]
    if right.empty:
        return right
    return right.loc[right.groupby(KEYS + ["framework"])["median_ms"].idxmin()]


def pairs(timed: pd.DataFrame) -> pd.DataFrame:
    """One row per KEYS where both frameworks have a best cell: median_ms_pt, median_ms_tf,
    optimization_pt, optimization_tf, ratio (PyTorch / TensorFlow: below 1, PyTorch is
    faster), a row label 'model, batch n (device)' and the text 'ratio (opt vs opt)'.
    Empty when no such pair exists."""
    best = best_per_framework(timed)
    if not {"pytorch", "tensorflow"} <= set(best["framework"]):
        return pd.DataFrame()
    pt = best[best["framework"] == "pytorch"].set_index(KEYS)
    tf = best[best["framework"] == "tensorflow"].set_index(KEYS)
    result = pd.merge(
        pt[["median_ms", "optimization"]], tf[["median_ms", "optimization"]],
        left_index=True, right_index=True, suffixes=("_pt", "_tf"),
    ).reset_index()
    if result.empty:
        return pd.DataFrame()
    result["ratio"] = result["median_ms_pt"] / result["median_ms_tf"]
    result["label"] = result["model"] + ", batch " + result["batch"].astype(str)
    if result["device"].nunique() > 1:
        result["label"] += " (" + result["device"] + ")"
    result["text"] = [f"{r.ratio:.2f} ({r.optimization_pt} vs {r.optimization_tf})"
                      for r in result.itertuples()]
    return result


def ratio_table(pairs: pd.DataFrame) -> pd.DataFrame:
    """The pairs' texts: rows 'model, batch', columns 'seqlen <n>', '—' where no pair."""
    table = pairs.pivot_table(index="label", columns="seqlen", values="text", aggfunc="first")
    table = table.sort_index(axis=1).fillna("—")
    table.columns = [f"seqlen {s}" for s in table.columns]
    return table.reset_index(names="model, batch")


def ratio_grid(pairs: pd.DataFrame) -> pd.DataFrame:
    """The ratios as numbers: rows the pairs' labels, columns sequence lengths."""
    grid = pairs.pivot_table(index="label", columns="seqlen", values="ratio", aggfunc="first")
    return grid.sort_index(axis=1)
