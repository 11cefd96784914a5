"""ONNX Runtime's matrix product for the machine's peak (dlbench.run.peak) and the noise
probe: a graph of one MatMul node in a session of the cell's threads, the operator that
the exported transformers' linear layers become (MatMul, then Add for the bias; in the
extended optimizations the attention's scaled products become FusedMatMul), computed by
MLAS on the CPU."""

from collections.abc import Callable

import numpy as np
from onnx import TensorProto, helper

_TYPES = {"fp32": (TensorProto.FLOAT, np.float32), "fp16": (TensorProto.FLOAT16, np.float16)}


def dtype_name(precision: str) -> str:
    return np.dtype(_TYPES.get(precision, _TYPES["fp32"])[1]).name


def product(backend, library: str, precision: str, n: int) -> Callable[[], object]:
    """A function computing one n×n by n×n product in `precision`, its operands made once
    from a fixed seed."""
    import onnxruntime as ort

    if library != "ort-matmul":
        raise ValueError(f"ONNX Runtime has no GEMM library {library!r}")
    if precision not in _TYPES:
        raise ValueError(f"ONNX Runtime's CPU MatMul has no {precision} kernel")
    kind, dtype = _TYPES[precision]
    session = ort.InferenceSession(matmul_graph(kind, n), backend.session_options(),
                                   providers=["CPUExecutionProvider"])
    generator = np.random.default_rng(0)
    feeds = {name: generator.standard_normal((n, n)).astype(dtype) for name in "ab"}
    return lambda: session.run(None, feeds)


def matmul_graph(kind: int, n: int) -> bytes:
    """A serialized ONNX model of one n×n MatMul, in the TensorProto element type `kind`."""
    values = [helper.make_tensor_value_info(name, kind, [n, n]) for name in "abc"]
    graph = helper.make_graph([helper.make_node("MatMul", ["a", "b"], ["c"])], "matmul",
                              values[:2], values[2:])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]
                             ).SerializeToString()
