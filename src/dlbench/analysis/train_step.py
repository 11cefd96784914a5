"""Transformer training steps: the step time per framework, optimization and optimizer, the
step's parts (forward + loss + backward; the optimizer step) and the optimizer's share, and
the numbers that answer "PyTorch's Adam is Python, TensorFlow's is C++: why is PyTorch not
slower?", for every framework measured."""

from itertools import combinations, product

import numpy as np
import pandas as pd

from dlbench.analysis.status import not_applicable
from dlbench.catalogue.frameworks import declarations
from dlbench.format import (
    fmt_error,
    fmt_ms,
    fmt_percent,
    fmt_s,
    framework_name,
    framework_rank,
    md_code,
    md_text,
    na,
)

SCENARIO = "train_step"
SHAPE = ["model", "device", "batch", "seqlen"]
# The summary columns of the parts (dlbench.measure.parts), and their names here.
_PARTS = {"breakdown_forward_backward_median_ms": "forward_backward_ms",
          "breakdown_optimizer_median_ms": "optimizer_ms",
          "breakdown_optimizer_share": "optimizer_share"}
NOT_SEPARABLE = "not separable"
# Per framework, the step its users run by default (what its high-level API's fit runs),
# which the optimizer comparison prefers; a framework not registered: its fastest step.
DEFAULT_STEP = {f.name: f.default_step for f in declarations()}
# A framework whose default optimizer composes ops per variable while another recipe of it
# runs one kernel per variable: that recipe, and what to say after "What ran".
KERNEL_PER_VARIABLE = {f.name: f.kernel_per_variable for f in declarations()
                       if f.kernel_per_variable}


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
    Also how many cells were left out: a framework with another framework's optimization
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


def _preference(cells: pd.DataFrame, framework: str) -> list[tuple[str, set[tuple]]]:
    """A framework's optimizations with their shapes: its default step (DEFAULT_STEP) first,
    then the others from the fastest step."""
    mine = cells[cells["framework"].eq(framework)]
    order = mine.groupby("optimization")["median_ms"].median().sort_values().index
    default = DEFAULT_STEP.get(framework)
    order = sorted(order, key=lambda name: name != default)  # stable: the default first
    return [(name, _shapes(mine[mine["optimization"].eq(name)])) for name in order]


def _choose(cells: pd.DataFrame) -> tuple[dict[str, str], set[tuple]] | None:
    """Each framework's optimization to compare, and the shapes they all have: the most
    frameworks that share a shape (in the registry's order), each with its most preferred
    optimization (`_preference`, the first framework's preference first); None if no two
    frameworks share a shape."""
    frameworks = sorted(cells["framework"].unique(), key=framework_rank)
    preferences = {fw: _preference(cells, fw) for fw in frameworks}
    for size in range(len(frameworks), 1, -1):
        for group in combinations(frameworks, size):
            for choice in product(*(preferences[fw] for fw in group)):
                shared = set.intersection(*(shapes for _, shapes in choice))
                if shared:
                    return {fw: name for fw, (name, _) in zip(group, choice, strict=True)}, shared
    return None


def _listed(parts: list[str]) -> str:
    """'a', 'a and b', 'a, b and c'."""
    return parts[0] if len(parts) == 1 else f"{', '.join(parts[:-1])} and {parts[-1]}"


def _verdict(steps: dict[str, pd.Series]) -> str:
    """'A's was the fastest; B's was 2.5× slower than A's; the difference is 60.0% of B's
    step.' over the frameworks' optimizer steps (`steps`: name → its medians)."""
    fastest = min(steps, key=lambda name: steps[name].optimizer_ms)
    best = steps[fastest].optimizer_ms
    slower = [(name, step) for name, step in steps.items() if step.optimizer_ms > best]
    if not slower:
        return "none was slower."
    name = framework_name(fastest)
    return f"{name}'s was the fastest; " + "; ".join(
        f"{framework_name(other)}'s was {step.optimizer_ms / best:.1f}× slower than "
        f"{name}'s, a difference of {fmt_percent((step.optimizer_ms - best) / step.median_ms)}"
        f" of {framework_name(other)}'s step" for other, step in slower) + "."


def seed_answer(frame: pd.DataFrame) -> list[str]:
    """Sentences (Markdown) answering "PyTorch's Adam is Python, TensorFlow's is C++: why is
    PyTorch not slower?" for every framework, from the separable Adam cells: each
    framework's default step against the others' (see `_choose`) on the shapes (model,
    device, batch, length) they all have — the optimizer's share of each step, the
    optimizer steps head to head, every recipe's optimizer step on those shapes, and the
    implementations that ran. Empty where no shape has separable Adam cells of two
    frameworks."""
    cells = steps(frame)
    cells = cells[cells["separable"] & cells["optimizer"].eq("adam")]
    if "step_implementation" not in cells:
        cells = cells.assign(step_implementation="")
    choice = _choose(cells)
    if choice is None:
        return []
    chosen, shared = choice
    cells = cells[cells.set_index(SHAPE).index.isin(list(shared))]
    recipes = {}  # per framework, its optimizations that have every shared shape
    for name in chosen:
        mine = cells[cells["framework"].eq(name)]
        whole = [r for r, group in mine.groupby("optimization") if _shapes(group) == shared]
        recipes[name] = mine[mine["optimization"].isin(whole)].groupby("optimization")[
            ["median_ms", "optimizer_ms", "optimizer_share"]].median()
    step = {name: recipes[name].loc[chosen[name]] for name in chosen}
    implementation = {name: cells[cells["framework"].eq(name) & cells["optimization"].eq(
        chosen[name])]["step_implementation"].iloc[0] for name in chosen}
    plural = "s" if len(shared) != 1 else ""
    every = "both" if len(chosen) == 2 else f"all {len(chosen)}"
    lines = [
        "**The optimizer's share.** Adam's update took " + _listed([
            f"{fmt_percent(step[name].optimizer_share)} of {md_text(framework_name(name))}'s "
            f"{md_code(chosen[name])} step" for name in chosen])
        + f" (medians over the {len(shared)} shape{plural} that {every} have); forward, loss "
        "and backward take the rest: however the update is written, it can move the step "
        "time by at most its share.",
        "**Head to head**: " + ", ".join(
            f"{md_text(framework_name(name))}'s {md_code(chosen[name])} Adam "
            + ("took " if i == 0 else "") + f"{fmt_ms(step[name].optimizer_ms)} ms"
            + (" per step" if i == 0 else "") for i, name in enumerate(chosen))
        + f": {_verdict(step)}",
        f"Adam's update on the same shape{plural}, per optimization: " + "; ".join(
            f"{md_text(framework_name(name))} " + ", ".join(
                f"{md_code(recipe)} {fmt_ms(ms)} ms" for recipe, ms in
                recipes[name]["optimizer_ms"].sort_values().items())
            for name in chosen) + ".",
        "**What ran**: " + "; ".join(f"{md_text(framework_name(name))} — "
                                     f"{md_text(implementation[name])}"
                                     for name in chosen)
        + f". The arithmetic is C++ kernels in {every}; the frameworks differ in how the "
        "kernels are dispatched, which is what these times measure.",
    ]
    for name, (recipe, note) in KERNEL_PER_VARIABLE.items():
        if name in chosen and chosen[name] != recipe:
            lines[-1] += (f" {framework_name(name)}'s {note}"
                          + (f" ({md_code(recipe)} above)." if recipe in recipes[name].index
                             else "."))
    return lines
