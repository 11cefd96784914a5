"""TensorFlow's matrix product for the machine's peak (dlbench.run.peak): `tf.matmul` in a
`tf.function`, as a graph cell runs its layers. On the CPU its kernel is Eigen's
contraction with oneDNN's sgemm blocks (ONEDNN_VERBOSE=1 shows `gemm_api` calls), or
oneDNN's own MatMul op where TensorFlow turns its oneDNN operations on (the
`tensorflow_onednn` version field); cuBLAS on a GPU."""

from collections.abc import Callable

import tensorflow as tf

_DTYPES = {"bf16": tf.bfloat16, "fp16": tf.float16}


def dtype_name(precision: str) -> str:
    return _DTYPES.get(precision, tf.float32).name


def product(backend, library: str, precision: str, n: int) -> Callable[[], object]:
    """A function computing one n×n by n×n product in `precision` on the backend's device,
    its operands made once from a fixed seed."""
    if library != "tf-matmul":
        raise ValueError(f"TensorFlow has no GEMM library {library!r}")
    dtype = _DTYPES.get(precision, tf.float32)
    with tf.device(backend.device_name):
        a, b = (tf.cast(tf.random.stateless_normal((n, n), seed=(0, i)), dtype)
                for i in range(2))
    return tf.function(lambda: tf.matmul(a, b))
