"""Every framework against the fastest, like with like: per precision, model, device, batch
size and sequence length, each framework's fastest right answer (its best recipe), and its
time over the fastest framework's (the median; in rounds, the level the paired ratios
compare: dlbench.analysis.summary.headline) with the ratio's 95% interval; a tie where that
interval contains 1. Where both cells were measured in the same rounds, the ratio and its
interval are the answer's (dlbench.analysis.headline): paired round by round, with the
spread between processes pooled over the scenario's cells (dlbench.analysis.rounds), so
that the page gives one figure for one comparison; else from the two medians' intervals
(dlbench.analysis.uncertainty).

Comparing at equal precision keeps one framework's bf16 cell from being set against
another's fp32 one. Each framework's best is taken over the recipes it measured (one with
more recipes is favoured a little: the minimum of more noisy candidates is lower), so the
table names the recipe that won on each side and how many competed, and
`against_fastest(…, recipes=["eager"])` gives the same-recipe comparison.

With two frameworks this is the two-framework ratio of old: the slower one's ratio, its
interval and its tie are those of slower/faster, the reciprocal of faster/slower.
"""

import pandas as pd

from dlbench.analysis import rounds
from dlbench.analysis.attention import same_attention
from dlbench.analysis.uncertainty import TIE, ratio_interval, verdict
from dlbench.format import framework_name, framework_rank

KEYS = ["model", "device", "batch", "seqlen"]
# A framework's verdict against the fastest of its cell (besides TIE; None: no interval).
FASTEST, SLOWER = "fastest", "slower"
NO_INTERVAL = "no interval"
# A cell's time as the report ranks it (dlbench.analysis.summary.headline: the median, or
# in rounds the level that the paired ratios compare), with its interval.
_TIMING = ["headline_ms", "headline_ci95_ms_low", "headline_ci95_ms_high"]


def best_per_framework(timed: pd.DataFrame) -> pd.DataFrame:
    """Per KEYS, precision and framework, the timed cell with the smallest time among
    those whose answer is not wrong (a wrong answer is no contender), with `candidates`:
    how many recipes competed."""
    right = timed[~timed["wrong_answer"]]
    if right.empty:
        return right.assign(candidates=pd.Series(dtype=int))
    groups = right.groupby(KEYS + ["precision", "framework"])
    best = right.loc[groups["headline_ms"].idxmin()]
    return best.assign(candidates=groups["headline_ms"].transform("size").loc[best.index])


def against_fastest(timed: pd.DataFrame, recipes: list[str] | None = None,
                    pooled: rounds.Spread | None = None) -> pd.DataFrame:
    """One row per KEYS, precision and framework where two or more frameworks have a best
    cell (among `recipes`' cells only, if given): the framework's median and interval, its
    winning optimization and number of candidates, the attention implementation; `fastest`
    (the framework with the smallest median of the cell); `ratio` (this median / the
    fastest's: 1 for the fastest, above 1 slower) with `ratio_low`/`ratio_high` and the
    `rounds` they were paired over (0: from the medians' intervals; `pooled`: the spread
    between processes to pair them with, as the answer's); `verdict`
    (fastest; for the others tie, slower, or None without intervals); a row label 'model,
    batch n (device)', the framework's `name` and the cell text. Rows in KEYS, precision
    and framework order; empty when no cell has two frameworks."""
    # The spread between processes as the answer pools it (pooled: the run's, from
    # rounds.run_spreads; else from these cells, over every recipe, the profiled left out).
    if pooled is None:
        pooled = rounds.spread(timed[~timed["profiled"]] if "profiled" in timed else timed)
    if recipes is not None:
        recipe = timed.get("optimization_recipe", timed["optimization"]).fillna(
            timed["optimization"])
        timed = timed[recipe.isin(recipes) | timed["optimization"].isin(recipes)]
    # The attention every framework ran among its right answers (a wrong cell decides
    # nothing, and is no contender anyway).
    best = best_per_framework(same_attention(timed[~timed["wrong_answer"]],
                                             KEYS + ["precision"]))
    index = KEYS + ["precision"]
    best = best[best.groupby(index)["framework"].transform("nunique") > 1]
    if best.empty:
        return pd.DataFrame()
    columns = [*index, "framework", *_TIMING, "optimization", "candidates"]
    if "attention_implementation" in best:
        columns.append("attention_implementation")
    cells = best.reset_index(drop=True)  # every column, for the rounds
    result = cells[columns].copy()
    first = result.groupby(index)["headline_ms"].idxmin()
    fastest = result.loc[first, index + ["framework", *_TIMING]].assign(_row=first.to_numpy())
    fastest = result[index].merge(fastest, on=index, how="left", suffixes=("", "_fastest"))
    result["fastest"] = fastest["framework"].to_numpy()
    result["ratio"], result["ratio_low"], result["ratio_high"] = ratio_interval(
        *(result[c] for c in _TIMING), *(fastest[c] for c in _TIMING))
    result["rounds"] = 0  # the rounds a paired ratio rests on (0: from the intervals)
    for row, against in enumerate(fastest["_row"]):
        by_round = rounds.paired(cells.loc[row], cells.loc[against], pooled)
        if by_round is not None and row != against:
            result.loc[row, ["ratio", "ratio_low", "ratio_high", "rounds"]] = by_round
    result["rounds"] = result["rounds"].astype(int)
    is_fastest = result["framework"].eq(result["fastest"])
    result.loc[is_fastest, ["ratio", "ratio_low", "ratio_high"]] = 1.0
    result["verdict"] = pd.Series(  # object: None (no interval) stays None
        [FASTEST if first else verdict(lo, hi, FASTEST, SLOWER)
         for first, lo, hi in zip(is_fastest, result["ratio_low"], result["ratio_high"],
                                  strict=True)], index=result.index, dtype=object)
    result["label"] = result["model"] + ", batch " + result["batch"].astype(str)
    if result["device"].nunique() > 1:
        result["label"] += " (" + result["device"] + ")"
    result["name"] = result["framework"].map(framework_name)
    result["text"] = [_text(r) for r in result.itertuples()]
    rank = result["framework"].map(framework_rank)
    return result.assign(_rank=rank).sort_values(index + ["_rank"]).drop(
        columns="_rank").reset_index(drop=True)


def _text(row) -> str:
    """'fastest: compile' for the fastest; '1.60 (1.51–1.70) graph' for another, with
    'tie: ' first where the interval holds 1."""
    if row.verdict == FASTEST:
        return f"{FASTEST}: {row.optimization}"
    paired = f", {row.rounds} rounds" if row.rounds else ""
    interval = "" if pd.isna(row.ratio_low) else (
        f" ({row.ratio_low:.2f}–{row.ratio_high:.2f}{paired})")
    tie = "tie: " if row.verdict == TIE else ""
    return f"{tie}{row.ratio:.2f}{interval} {row.optimization}"


def precisions(ratios: pd.DataFrame) -> list[str]:
    """The precisions with a comparison, fp32 first."""
    found = set(ratios["precision"]) if not ratios.empty else set()
    order = ["fp32", "tf32", "bf16", "fp16"]
    return [p for p in order if p in found] + sorted(found - set(order))


def _grid(ratios: pd.DataFrame, precision: str, values: str) -> pd.DataFrame:
    """`values` of one precision: rows 'model, batch · framework' (frameworks in registry
    order), columns sequence lengths."""
    chosen = ratios[ratios["precision"] == precision]
    chosen = chosen.assign(row=chosen["label"] + " · " + chosen["name"])
    grid = chosen.pivot_table(index="row", columns="seqlen", values=values, aggfunc="first")
    order = chosen.drop_duplicates("row").assign(
        _rank=lambda c: c["framework"].map(framework_rank)).sort_values(["label", "_rank"])
    grid = grid.reindex(order["row"]).sort_index(axis=1)
    grid.index.name = None
    return grid


def ratio_table(ratios: pd.DataFrame, precision: str = "fp32") -> pd.DataFrame:
    """The texts of one precision: one row per 'model, batch' and framework, columns
    'seqlen <n>', '—' where the framework has no comparison."""
    chosen = ratios[ratios["precision"] == precision]
    table = chosen.pivot_table(index=["label", "name"], columns="seqlen", values="text",
                               aggfunc="first")
    table = table.sort_index(axis=1).fillna("—")
    table.columns = [f"seqlen {s}" for s in table.columns]
    table = table.reset_index().rename(columns={"label": "model, batch",
                                                "name": "framework"})
    rank = table["framework"].map(framework_rank)
    return table.assign(_rank=rank).sort_values(["model, batch", "_rank"]).drop(
        columns="_rank").reset_index(drop=True)


def ratio_grid(ratios: pd.DataFrame, precision: str = "fp32") -> pd.DataFrame:
    """The ratios of one precision as numbers (rows and columns as in `_grid`)."""
    return _grid(ratios, precision, "ratio")


def verdict_grid(ratios: pd.DataFrame, precision: str = "fp32") -> pd.DataFrame:
    """The verdicts of one precision (fastest, tie, slower, None), shaped like ratio_grid."""
    chosen = ratios.assign(verdict=ratios["verdict"].fillna(NO_INTERVAL))
    return _grid(chosen, precision, "verdict").replace({NO_INTERVAL: None})


def ties(ratios: pd.DataFrame, precision: str = "fp32") -> pd.DataFrame:
    """Which frameworks of one precision tie with the fastest (shaped like ratio_grid)."""
    return verdict_grid(ratios, precision).eq(TIE)


def outcomes(ratios: pd.DataFrame, precision: str = "fp32") -> pd.Series:
    """Per cell (KEYS) of one precision, who was fastest: '<framework> fastest' when every
    other framework is slower beyond the noise, 'tie: A, B' naming the frameworks the
    fastest ties with (fastest first), or 'no interval' where a verdict lacks one."""
    chosen = ratios[ratios["precision"] == precision]
    result = {}
    for key, cell in chosen.groupby(KEYS, sort=True):
        cell = cell.sort_values("ratio", kind="stable")
        if cell["verdict"].isna().any():
            result[key] = NO_INTERVAL
            continue
        tied = cell[cell["verdict"].isin([FASTEST, TIE])]["name"].tolist()
        result[key] = f"{TIE}: {', '.join(tied)}" if len(tied) > 1 else f"{tied[0]} fastest"
    return pd.Series(result, dtype=object)


def tally(ratios: pd.DataFrame, precision: str = "fp32") -> dict[str, int]:
    """How many cells of one precision each outcome has (`outcomes`)."""
    return outcomes(ratios, precision).value_counts().to_dict()


def candidates(timed: pd.DataFrame, precision: str = "fp32") -> dict[str, list[str]]:
    """Per framework, the optimizations of one precision that competed (right answers)."""
    right = timed[~timed["wrong_answer"] & timed["precision"].eq(precision)]
    return {fw: sorted(cells["optimization"].unique())
            for fw, cells in sorted(right.groupby("framework"),
                                    key=lambda item: framework_rank(item[0]))}


def attention(ratios: pd.DataFrame) -> dict[str, list[str]]:
    """Per framework, the attention implementations of the compared cells."""
    if "attention_implementation" not in ratios:
        return {}
    found = {fw: sorted(cells["attention_implementation"].dropna().unique())
             for fw, cells in ratios.groupby("framework")}
    return {fw: found[fw] for fw in sorted(found, key=framework_rank) if found[fw]}
