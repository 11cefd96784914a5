"""ONNX Runtime inference: the model exported from PyTorch with the shared weights
(export.py), run by an `InferenceSession` on the CPU execution provider at the recipe's
graph optimization level. The session is made when the recipe is applied (its graph
optimizations are ONNX Runtime's compilation: in the cell's compile time); the export,
once per model, is recorded in the cell's details (onnx_export_s, and whether an earlier
cell made it).

The exported graph is transformers' PyTorch attention as the cell asks for it (eager:
the explicit attention of every framework's default, the mask applied), traced with the
mask as an input: every recipe does the same attention work."""

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

# Operators that move, view or create tensors without computing on them: left out of the
# record of which operators computed in which type.
_MOVEMENT = frozenset({"Cast", "CastLike", "Constant", "Identity", "Reshape", "Transpose",
                       "Shape", "Slice", "Gather", "Concat", "Unsqueeze", "Squeeze", "Expand"})


@dataclass(frozen=True)
class Exported:
    """A model as ONNX Runtime's cells hold it: the exported file, before any session, and
    how it was made (export.exported's record)."""

    path: Path
    attention: str
    made: dict


class OnnxRuntimeInference:
    recipes: dict[str, Callable]  # by name, bound to this instance (set in __init__)

    def __init__(self, backend: OnnxRuntimeBackend):
        self.backend = backend
        self._export: dict = {}  # the cell's model's export, as its details record it
        self._built = False  # this cell built its model (else a group's earlier cell did)
        self.recipes = {f"ort-{level}": self._session_step(level)
                        for level in ("disable", "basic", "extended", "all")}

    def build(self, spec: ModelSpec, seed: int, optimization: Optimization,
              weights: Path | None = None, attention: str = "sdpa") -> Exported:
        """The exported model of the shared weights if given, else of random weights from
        the seed (PyTorch's, as its cells build them)."""
        if weights is not None and not Path(weights).is_file():
            raise FileNotFoundError(f"weights file {weights} does not exist")
        path, made = export.exported(spec.name, seed, weights, attention,
                                     self.backend.threads)
        self._built = True
        return Exported(path, attention, made)

    def _session_step(self, level: str) -> Callable:
        def apply(model: Exported, inputs: dict, optimization: Optimization):
            # A group's later cells reuse the export that its first one found or made.
            self._export = {**model.made, "reused": model.made["reused"] or not self._built}
            graph = (str(model.path) if optimization.precision.name == "fp32"
                     else _float16(model.path).SerializeToString())
            session = ort.InferenceSession(graph, self.backend.session_options(level),
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
        # torch.onnx writes SDPA out as its explicit operations, the mask applied: not the
        # fused kernel that PyTorch's sdpa cells run (nor its skip of an all-ones mask).
        name = "eager" if model.attention == "eager" else f"{model.attention}-exported"
        return {"implementation": name, "mask_applied": True,
                "implementation_of": "transformers (PyTorch classes), exported to ONNX"}

    def compilation(self) -> None:
        return None

    def precision_ops(self, model: Exported, inputs: dict, optimization: Optimization
                      ) -> dict:
        """Which operators compute in float16 and which stay float32 in the converted
        graph (the converter keeps some in float32, with casts around them)."""
        graph = onnx.shape_inference.infer_shapes(_float16(model.path)).graph
        types = {value.name: value.type.tensor_type.elem_type
                 for value in (*graph.value_info, *graph.input, *graph.output)}
        seen: dict[int, set] = {onnx.TensorProto.FLOAT: set(), onnx.TensorProto.FLOAT16: set()}
        for node in graph.node:
            if node.op_type in _MOVEMENT:
                continue
            for output in node.output:
                seen.get(types.get(output), set()).add(node.op_type)
        return {"float32_ops": sorted(seen[onnx.TensorProto.FLOAT]),
                "reduced_ops": sorted(seen[onnx.TensorProto.FLOAT16]),
                "method": "the converted graph's operators by the type of their outputs "
                          "(ONNX shape inference; casts, reshapes and constants left out)"}

    def release(self) -> None:
        """Nothing global to put back: each session is the cell's own."""

    def versions(self) -> dict:
        return {"onnx": onnx.__version__,
                **{f"onnx_{key}": value for key, value in self._export.items()
                   if key in ("export_s", "exporter", "reused", "bytes")}}


def _float16(path: Path) -> "onnx.ModelProto":
    """The exported float32 graph converted to float16 (ONNX Runtime's own converter: its
    weights and operators, but those it keeps in float32; float32 inputs and outputs)."""
    from onnxruntime.transformers.float16 import convert_float_to_float16

    return convert_float_to_float16(onnx.load(str(path)), keep_io_types=True)


def make_ops(backend: OnnxRuntimeBackend) -> OnnxRuntimeInference:
    return OnnxRuntimeInference(backend)
