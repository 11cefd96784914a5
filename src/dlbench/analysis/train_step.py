"""Transformer training steps: the step time per framework, optimization and optimizer, the
step's parts (forward + loss + backward; the optimizer step) and the optimizer's share, and
the numbers that answer "PyTorch's Adam is Python, TensorFlow's is C++: why is PyTorch not
slower?"."""

import numpy as np
import pandas as pd

from dlbench.analysis.status import not_applicable
from dlbench.report.format import fmt_error, fmt_ms, fmt_percent, fmt_s, framework_name, na

SCENARIO = "train_step"
SHAPE = ["model", "device", "batch", "seqlen"]
# The summary columns of the parts (dlbench.measure.parts), and their names here.
_PARTS = {"breakdown_forward_backward_median_ms": "forward_backward_ms",
          "breakdown_optimizer_median_ms": "optimizer_ms",
          "breakdown_optimizer_share": "optimizer_share"}
NOT_SEPARABLE = "not separable"


def steps(frame: pd.DataFrame) -> pd.DataFrame:
    """The timed cells of the scenario with `forward_backward_ms`, `optimizer_ms` and
    `optimizer_share` (NaN for a step that is not separable) and `separable`."""
    cells = frame[frame["scenario"].eq(SCENARIO) & frame["timed"]].copy()
    for column, name in _PARTS.items():
        cells[name] = (cells[column] if column in cells else pd.Series(np.nan, cells.index)
                       ).astype(float)
    cells["separable"] = cells["optimizer_ms"].notna()
    return cells


def _loss_check(row) -> str:
    """'✓ 3.0e-08' within the tolerance, '✗ 1.2e-02' outside it, '' unchecked."""
    if not row.checked:
        return ""
    mark = "✗" if row.wrong_answer else "✓"
    error = row.correctness_max_rel_error
    return f"{mark} {'not finite' if pd.isna(error) else fmt_error(error)}"


def step_table(frame: pd.DataFrame, several_devices: bool) -> tuple[pd.DataFrame, int]:
    """One row per cell of the scenario, by shape and optimizer: the median step, its parts
    and the optimizer's share, the speed-up over the framework's eager with the same
    optimizer, the first step (compilation), samples and tokens per second, and the initial
    loss's error against the reference; N/A with the reason where the cell did not run.
    Also how many cells were left out: a framework with the other framework's optimization
    (N/A by design)."""
    cells = frame[frame["scenario"].eq(SCENARIO)]
    by_design = not_applicable(cells) & ~cells["timed"]
    cells = cells[~by_design]
    parts = steps(frame)
    order = ["model", "batch", "seqlen", "optimizer", "framework", "optimization"]
    rows = []
    for row in cells.sort_values(order + ["device"]).itertuples():
        out = {"model": row.model, "batch": row.batch, "length": row.seqlen,
               "optimizer": row.optimizer, "framework": framework_name(row.framework),
               "optimization": row.optimization}
        if several_devices:
            out["device"] = row.device
        if not row.timed:
            out["step ms"] = na(row.status, row.reason, width=60)
            rows.append(out)
            continue
        part = parts.loc[row.Index]
        out.update({
            "step ms": fmt_ms(row.median_ms),
            "forward + backward ms": fmt_ms(part.forward_backward_ms) if part.separable
            else NOT_SEPARABLE,
            "optimizer ms": fmt_ms(part.optimizer_ms) if part.separable else NOT_SEPARABLE,
            "optimizer share": fmt_percent(part.optimizer_share),
            "speed-up over eager": "" if pd.isna(row.speedup) else f"{row.speedup:.2f}×",
            "first step s": fmt_s(row.cold_start_s),
            "samples/s": fmt_ms(row.samples_per_s),
            "tokens/s": fmt_ms(row.tokens_per_s),
            "initial loss vs reference": _loss_check(row),
        })
        rows.append(out)
    return pd.DataFrame(rows).fillna(""), int(by_design.sum())


def bars(frame: pd.DataFrame) -> dict[tuple, pd.DataFrame]:
    """The stacked bars of each shape (model, device, batch, length): one row per timed cell,
    labelled '<framework> <optimization> · <optimizer>', with `forward_backward_ms`,
    `optimizer_ms`, `optimizer_share` and `step_ms` (the whole step, the only value where it is not
    separable), ordered by optimizer, framework and optimization."""
    cells = steps(frame)
    result = {}
    for shape, group in cells.groupby(SHAPE, sort=True):
        group = group.sort_values(["optimizer", "framework", "optimization"])
        result[shape] = pd.DataFrame({
            "label": [f"{framework_name(f)} {o} · {opt}" for f, o, opt in
                      zip(group["framework"], group["optimization"], group["optimizer"],
                          strict=True)],
            "framework": group["framework"].to_numpy(),
            "optimizer": group["optimizer"].to_numpy(),
            "forward_backward_ms": group["forward_backward_ms"].to_numpy(),
            "optimizer_ms": group["optimizer_ms"].to_numpy(),
            "optimizer_share": group["optimizer_share"].to_numpy(),
            "step_ms": group["median_ms"].to_numpy(dtype=float),
        })
    return result


def optimizer_costs(frame: pd.DataFrame) -> pd.DataFrame:
    """Per framework, optimization and optimizer (and device), over their separable timed
    cells: cells, the median step, optimizer step and share, and the implementation."""
    cells = steps(frame)
    cells = cells[cells["separable"]]
    if cells.empty:
        return pd.DataFrame(columns=["framework", "optimization", "optimizer", "device",
                                     "cells", "step_ms", "optimizer_ms", "optimizer_share",
                                     "implementation"])
    if "step_implementation" not in cells:
        cells = cells.assign(step_implementation="")
    return cells.groupby(["framework", "optimization", "optimizer", "device"]).agg(
        cells=("cell_id", "size"), step_ms=("median_ms", "median"),
        optimizer_ms=("optimizer_ms", "median"), optimizer_share=("optimizer_share", "median"),
        implementation=("step_implementation", "first"),
    ).reset_index()


def share_table(frame: pd.DataFrame, several_devices: bool) -> pd.DataFrame:
    """`optimizer_costs` as displayed: one row per framework and optimization (and device),
    for each optimizer its median optimizer step (ms) and share of the step, and Adam's
    extra cost over SGD."""
    costs = optimizer_costs(frame)
    keys = ["framework", "optimization"] + (["device"] if several_devices else [])
    rows = []
    for key, group in costs.groupby(keys, sort=True):
        out = dict(zip(keys, key, strict=True))
        out["framework"] = framework_name(out["framework"])
        by_optimizer = group.set_index("optimizer")
        for name, row in by_optimizer.iterrows():
            out[f"{name}: optimizer ms"] = fmt_ms(row.optimizer_ms)
            out[f"{name}: share"] = fmt_percent(row.optimizer_share)
        if {"sgd", "adam"} <= set(by_optimizer.index):
            extra = by_optimizer.loc["adam", "optimizer_ms"] - by_optimizer.loc["sgd",
                                                                                "optimizer_ms"]
            out["adam − sgd ms"] = fmt_ms(extra) if extra >= 0 else f"−{fmt_ms(-extra)}"
        rows.append(out)
    return pd.DataFrame(rows).fillna("")


def _shapes(cells: pd.DataFrame) -> set[tuple]:
    return set(cells.set_index(SHAPE).index)


def _pair(cells: pd.DataFrame) -> tuple[str, str, set[tuple]] | None:
    """The PyTorch and TensorFlow optimizations to compare, and the shapes both have:
    PyTorch's default (eager) and TensorFlow's graph (what Keras's fit runs) first, then
    each framework's others from the fastest step; None if no pair shares a shape."""
    def preference(framework: str, default: str) -> list[tuple[str, set[tuple]]]:
        mine = cells[cells["framework"].eq(framework)]
        order = mine.groupby("optimization")["median_ms"].median().sort_values().index
        order = sorted(order, key=lambda name: name != default)  # stable: the default first
        return [(name, _shapes(mine[mine["optimization"].eq(name)])) for name in order]

    for py, py_shapes in preference("pytorch", "eager"):
        for tf, tf_shapes in preference("tensorflow", "graph"):
            if py_shapes & tf_shapes:
                return py, tf, py_shapes & tf_shapes
    return None


def seed_answer(frame: pd.DataFrame) -> list[str]:
    """Sentences (Markdown) answering "PyTorch's Adam is Python, TensorFlow's is C++: why is
    PyTorch not slower?" from the separable Adam cells: PyTorch's default (eager) against
    TensorFlow's graph (see `_pair`) on the shapes (model, device, batch, length) both have —
    the optimizer's share of each step, the two optimizer steps head to head, every recipe's
    optimizer step on those shapes, and the implementations that ran. Empty where no shape
    has separable Adam cells of both frameworks."""
    cells = steps(frame)
    cells = cells[cells["separable"] & cells["optimizer"].eq("adam")]
    if "step_implementation" not in cells:
        cells = cells.assign(step_implementation="")
    pair = _pair(cells)
    if pair is None:
        return []
    chosen, shared = {"pytorch": pair[0], "tensorflow": pair[1]}, pair[2]
    cells = cells[cells.set_index(SHAPE).index.isin(list(shared))]
    recipes = {}  # per framework, its optimizations that have every shared shape
    for name in chosen:
        mine = cells[cells["framework"].eq(name)]
        whole = [r for r, group in mine.groupby("optimization") if _shapes(group) == shared]
        recipes[name] = mine[mine["optimization"].isin(whole)].groupby("optimization")[
            ["median_ms", "optimizer_ms", "optimizer_share"]].median()
    py, tf = (recipes[name].loc[chosen[name]] for name in chosen)
    implementation = {name: cells[cells["framework"].eq(name) & cells["optimization"].eq(
        chosen[name])]["step_implementation"].iloc[0] for name in chosen}
    plural = "s" if len(shared) != 1 else ""
    if py.optimizer_ms <= tf.optimizer_ms:
        verdict = "PyTorch's was no slower."
    else:
        extra = (py.optimizer_ms - tf.optimizer_ms) / py.median_ms
        verdict = (f"PyTorch's was {py.optimizer_ms / tf.optimizer_ms:.1f}× slower; the "
                   f"difference is {fmt_percent(extra)} of PyTorch's step.")
    lines = [
        f"**The optimizer's share.** Adam's update took {fmt_percent(py.optimizer_share)} of "
        f"PyTorch's `{chosen['pytorch']}` step and {fmt_percent(tf.optimizer_share)} of "
        f"TensorFlow's `{chosen['tensorflow']}` step (medians over the {len(shared)} "
        f"shape{plural} that both have); forward, loss and backward take the rest: however "
        "the update is written, it can move the step time by at most its share.",
        f"**Head to head**: PyTorch's `{chosen['pytorch']}` Adam took {fmt_ms(py.optimizer_ms)} "
        f"ms per step, TensorFlow's `{chosen['tensorflow']}` Adam {fmt_ms(tf.optimizer_ms)} ms: "
        f"{verdict}",
        f"Adam's update on the same shape{plural}, per optimization: " + "; ".join(
            f"{framework_name(name)} " + ", ".join(
                f"`{recipe}` {fmt_ms(ms)} ms" for recipe, ms in
                recipes[name]["optimizer_ms"].sort_values().items())
            for name in chosen) + ".",
        f"**What ran**: PyTorch — {implementation['pytorch']}; TensorFlow — "
        f"{implementation['tensorflow']}. The arithmetic is C++ kernels in both; the "
        "frameworks differ in how the kernels are dispatched, which is what these times "
        "measure.",
    ]
    if "legacy" not in implementation["tensorflow"]:
        legacy = "legacy-optimizer" in recipes["tensorflow"].index
        lines[-1] += (" TensorFlow's Keras optimizers (2.11 and later) compose TensorFlow ops "
                      "per variable too; its single C++ kernel per variable "
                      "(ResourceApplyAdam) is the legacy optimizer's"
                      + (" (`legacy-optimizer` above)." if legacy else "."))
    return lines
