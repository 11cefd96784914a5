"""ONNX Runtime inference: the model exported from PyTorch with the shared weights
(export.py), run by an `InferenceSession` on the CPU execution provider at the recipe's
graph optimization level. The session is made when the recipe is applied (its graph
optimizations are ONNX Runtime's compilation: in the cell's compile time); the export,
once per model, is recorded in the cell's details (onnx_export_s, and whether an earlier
cell made it).

The exported graph is transformers' PyTorch attention as the cell asks for it (eager:
the explicit attention of every framework's default, the mask applied), traced with the
mask as an input: every recipe does the same attention work."""

import atexit
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort

from dlbench.catalogue.models import ModelSpec
from dlbench.catalogue.recipes import Optimization
from dlbench.frameworks.onnxruntime import export
from dlbench.frameworks.onnxruntime.backend import PROVIDER, OnnxRuntimeBackend


@dataclass(frozen=True)
class Exported:
    """A model as ONNX Runtime's cells hold it: the exported file, before any session."""

    path: Path
    attention: str


class OnnxRuntimeInference:
    recipes: dict[str, Callable]  # by name, bound to this instance (set in __init__)

    def __init__(self, backend: OnnxRuntimeBackend):
        self.backend = backend
        self._export: dict = {}
        self._scratch: Path | None = None  # exports of random weights (no reference)
        self.recipes = {f"ort-{level}": self._session_step(level)
                        for level in ("disable", "basic", "extended", "all")}

    def build(self, spec: ModelSpec, seed: int, optimization: Optimization,
              weights: Path | None = None, attention: str = "sdpa") -> Exported:
        """The exported model of the shared weights if given, else of random weights from
        the seed (PyTorch's, as its cells build them)."""
        if weights is not None and not Path(weights).is_file():
            raise FileNotFoundError(f"weights file {weights} does not exist")
        if weights is None and self._scratch is None:
            # Removed when the process ends: a group's next cells reuse the model.
            self._scratch = Path(tempfile.mkdtemp(prefix="dlbench-onnx-"))
            atexit.register(shutil.rmtree, self._scratch, True)
        path, self._export = export.exported(
            spec.name, seed, weights, attention, self.backend.threads, self._scratch)
        return Exported(path, attention)

    def _session_step(self, level: str) -> Callable:
        def apply(model: Exported, inputs: dict, optimization: Optimization):
            session = ort.InferenceSession(str(model.path),
                                           self.backend.session_options(level),
                                           providers=[PROVIDER])
            return lambda: session.run([export.OUTPUT], inputs)[0]

        return apply

    def inputs(self, token_ids: np.ndarray) -> dict:
        ids = np.ascontiguousarray(token_ids, dtype=np.int64)  # as exported
        return {"input_ids": ids, "attention_mask": np.ones_like(ids)}

    def same_attention_work(self, model: Exported, inputs: dict) -> None:
        """Nothing to do: the mask is an input of the exported graph, applied whatever
        its values, in every recipe."""

    def to_numpy(self, output: np.ndarray) -> np.ndarray:
        return np.asarray(output, dtype=np.float32)

    def attention(self, model: Exported) -> dict:
        return {"implementation": model.attention, "mask_applied": True,
                "implementation_of": "transformers (PyTorch classes), exported to ONNX"}

    def compilation(self) -> None:
        return None

    def precision_ops(self, model: Exported, inputs: dict, optimization: Optimization
                      ) -> dict:
        """Never asked: the backend refuses every reduced precision (precision_problem)."""
        raise NotImplementedError("ONNX Runtime runs the float32 graph only")

    def release(self) -> None:
        """Nothing global to put back: each session is the cell's own."""

    def versions(self) -> dict:
        return {"onnx": onnx.__version__,
                **{f"onnx_{key}": value for key, value in self._export.items()
                   if key in ("export_s", "exporter", "reused", "bytes")}}


def make_ops(backend: OnnxRuntimeBackend) -> OnnxRuntimeInference:
    return OnnxRuntimeInference(backend)
