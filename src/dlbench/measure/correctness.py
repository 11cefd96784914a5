"""How far a cell's output is from the reference output (framework-independent)."""

import json
import os
from pathlib import Path

import numpy as np

from dlbench.catalogue import frameworks
from dlbench.catalogue.precisions import Precision

# What every cell's output is compared with, as its record names it.
REFERENCE = (f"{frameworks.get(frameworks.REFERENCE_FRAMEWORK).label} eager, fp32, CPU, "
             "the same weights and token ids")


def model_fingerprint(params: dict) -> str:
    """What a reference output depends on besides the weights and the token ids."""
    return json.dumps(params, sort_keys=True)


def save_reference(path: str | Path, output: np.ndarray, token_ids: np.ndarray,
                   params: dict) -> None:
    """The reference output with what it was computed from, written whole or not at all."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    with open(tmp, "wb") as f:
        np.savez(f, output=output, token_ids=token_ids,
                 model=np.array(model_fingerprint(params)))
    os.replace(tmp, path)


def load_reference(path: str | Path, token_ids: np.ndarray, params: dict) -> np.ndarray:
    """The reference output; ValueError if it was made for other inputs or another model."""
    with np.load(path) as saved:
        if not np.array_equal(saved["token_ids"], token_ids):
            raise ValueError(f"reference {path} was made for other token ids: delete it")
        if str(saved["model"]) != model_fingerprint(params):
            raise ValueError(f"reference {path} was made for another model config: delete it")
        return saved["output"]


def compare(output: np.ndarray, reference: np.ndarray, reference_path: str | Path,
            precision: Precision) -> dict:
    """Max absolute and relative error of `output` against the reference, and the verdict.

    The relative error is normwise: max |output − reference| / max |reference|, so that
    outputs near zero do not turn rounding into huge relative errors. A non-finite output
    is outside any tolerance.
    """
    if output.shape != reference.shape:
        raise ValueError(
            f"output shape {output.shape} differs from the reference's {reference.shape} "
            f"({reference_path})"
        )
    finite = bool(np.isfinite(output).all())
    scale = float(np.abs(reference).max())
    max_abs = rel = None
    if finite:
        max_abs = float(np.abs(output.astype(np.float64) - reference).max())
        rel = max_abs / scale if scale > 0 else max_abs
    return {
        "reference": REFERENCE,
        "reference_file": str(reference_path),
        "precision": precision.name,
        "finite": finite,
        "max_abs_error": max_abs,
        "max_rel_error": rel,
        "reference_max_abs": scale,
        "tolerance": precision.tolerance,
        "within_tolerance": finite and rel <= precision.tolerance,
    }
