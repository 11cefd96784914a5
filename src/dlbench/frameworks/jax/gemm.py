"""JAX's matrix product for the machine's peak (dlbench.run.peak): `jnp.matmul` under `jax.jit`,
as a jit cell runs its layers (XLA's dot: its CPU runtime's Eigen or oneDNN kernels, cuBLAS
on a GPU), in float32 at the backend's 'highest' precision."""

from collections.abc import Callable

import jax
import jax.numpy as jnp

_DTYPES = {"bf16": jnp.bfloat16, "fp16": jnp.float16}


def dtype_name(precision: str) -> str:
    return jnp.dtype(_DTYPES.get(precision, jnp.float32)).name


def product(backend, library: str, precision: str, n: int) -> Callable[[], object]:
    """A function computing one n×n by n×n product in `precision` on the backend's device,
    its operands made once from a fixed seed. Each call waits for its product: JAX
    dispatches asynchronously, and independent products could otherwise overlap."""
    if library != "jax-matmul":
        raise ValueError(f"JAX has no GEMM library {library!r}")
    dtype = _DTYPES.get(precision, jnp.float32)
    a, b = (jax.random.normal(key, (n, n), jnp.float32).astype(dtype)
            for key in jax.random.split(jax.random.key(0), 2))
    matmul = jax.jit(jnp.matmul)
    return lambda: matmul(a, b).block_until_ready()
