"""What each framework computes in float32 under its mixed-precision mode (bf16, fp16):
each framework decides it its own way (its declaration says how), so the same name is not
the same arithmetic; and how float32 matrix products were computed (TF32 or not)."""

import pandas as pd

from dlbench.catalogue import frameworks
from dlbench.format import framework_name


def how_each_framework() -> list[str]:
    """One line per registered framework, in the registry's order: what its reduced
    precisions compute in the reduced type and keep in float32, and where a cell's list of
    ops comes from, as its declaration says."""
    return [f"**{f.label}**: {f.mixed_precision or 'not declared by the framework'}."
            for f in frameworks.declarations()]


def float32_ops(timed: pd.DataFrame) -> pd.DataFrame | None:
    """Per framework and reduced precision, the ops that computed in float32 and those in
    the reduced type (the union over its cells, '; '-joined as in the summary); None when
    no such cell recorded them."""
    column = "mixed_precision_float32_ops"
    if column not in timed or timed[column].isna().all():
        return None
    cells = timed[timed[column].notna()]
    rows = []
    for (framework, precision), group in cells.groupby(["framework", "precision"]):
        rows.append({"framework": framework_name(framework), "precision": precision,
                     "cells": len(group),
                     "in float32": _union(group[column]),
                     "in the reduced type": _union(group["mixed_precision_reduced_ops"])})
    return pd.DataFrame(rows)


def _union(values: pd.Series) -> str:
    ops = {op.strip() for value in values.dropna() for op in str(value).split(";")}
    return ", ".join(sorted(op for op in ops if op))


def tf32_cells(timed: pd.DataFrame) -> pd.DataFrame:
    """The timed cells whose float32 matrix products were allowed TF32 although their
    precision is not tf32 (none, when every framework is set as dlbench sets it)."""
    if "arithmetic_tf32" not in timed:
        return timed.iloc[0:0]
    allowed = timed["arithmetic_tf32"].astype("boolean").fillna(False).astype(bool)
    return timed[allowed & timed["precision"].ne("tf32")]
