"""The CNN's convolution for JAX on the CPU, with its kernel's gradient computed as matrix
products.

XLA:CPU computes a convolution's forward pass and its input's gradient at ~1.7× PyTorch's
time here, but its kernel's gradient at ~9× (bench/conv_gradients.py: 466 ms of a JAX
step's 640 against PyTorch's 51 on 2026-11-28's Intel Xeon; no XLA flag of jaxlib 0.10.2
changed it: `--xla_cpu_use_onednn`, `--xla_cpu_experimental_onednn_custom_call`,
`--xla_cpu_use_xnnpack`; upstream: openxla/xla#34273, jax-ml/jax#23783). The kernel's
gradient of a stride-1 'same' convolution is the product of the input's k × k shifted
copies (an im2col) with the output's gradient: the same sums in another order, which XLA
runs as GEMMs. `conv` is that: XLA's own convolution forward and for the input's gradient,
GEMMs for the kernel's.
"""

from functools import partial

import jax
import jax.numpy as jnp
from jax import lax

_LAYOUT = ("NHWC", "HWIO", "NHWC")  # Flax's
_IMAGES = 4  # images of the batch per GEMM of the kernel's gradient


def _forward(x: jax.Array, kernel: jax.Array) -> jax.Array:
    return lax.conv_general_dilated(x, kernel, (1, 1), "SAME", dimension_numbers=_LAYOUT)


@jax.custom_vjp
def conv(x: jax.Array, kernel: jax.Array) -> jax.Array:
    """A stride-1 'same' convolution, NHWC input, HWIO kernel (as flax.linen.Conv's)."""
    return _forward(x, kernel)


def _conv_fwd(x, kernel):
    return _forward(x, kernel), (x, kernel)


def _conv_bwd(saved, grad):
    x, kernel = saved
    _, input_vjp = jax.vjp(partial(_forward, kernel=kernel), x)
    return input_vjp(grad)[0], kernel_gradient(x, grad, kernel)


conv.defvjp(_conv_fwd, _conv_bwd)


def kernel_gradient(x: jax.Array, grad: jax.Array, kernel: jax.Array) -> jax.Array:
    """d(loss)/d(kernel) of a stride-1 'same' convolution, in the kernel's (kh, kw, in, out)
    shape and type: for a few images of the batch at a time, the k × k shifted copies of
    their input side by side (an im2col: rows × k·k·in) against their output's gradient
    (rows × out), one GEMM, summed over the batch. A few images at a time keep the operands
    in the cache: the CNN's four layers took 108 ms at 4 images, 135 ms as one product per
    kernel position over the whole batch, 420 ms as XLA's convolution (batch 64, 2
    threads)."""
    kh, kw, channels, out = kernel.shape
    batch, height, width = grad.shape[:3]
    # 'same' pads (k - 1) // 2 before and k // 2 after, as XLA does for odd and even k.
    padded = jnp.pad(x, ((0, 0), ((kh - 1) // 2, kh // 2), ((kw - 1) // 2, kw // 2), (0, 0)))
    per = max(n for n in range(1, _IMAGES + 1) if batch % n == 0)

    def images(part):
        xs, gs = part
        columns = jnp.concatenate([xs[:, i:i + height, j:j + width, :]
                                   for i in range(kh) for j in range(kw)], axis=-1)
        rows = per * height * width
        return lax.dot_general(columns.reshape(rows, kh * kw * channels),
                               gs.reshape(rows, out), (((0,), (0,)), ((), ())),
                               precision=lax.Precision.HIGHEST)

    parts = (padded.reshape(batch // per, per, *padded.shape[1:]),
             grad.reshape(batch // per, per, height, width, out))
    return lax.map(images, parts).sum(0).reshape(kernel.shape).astype(kernel.dtype)
