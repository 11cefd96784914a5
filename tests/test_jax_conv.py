"""dlbench's convolution for JAX's CNN on the CPU (dlbench.frameworks.jax.conv): the same
forward pass and the same gradients as XLA's own convolution — kernel sizes odd and even,
a batch that the GEMMs' slices of images do not divide, float32 and bfloat16 — so that its
speed is not bought with another answer."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

from dlbench.frameworks.jax.conv import conv


def _xla(x, kernel):
    return lax.conv_general_dilated(x, kernel, (1, 1), "SAME",
                                    dimension_numbers=("NHWC", "HWIO", "NHWC"))


@pytest.mark.parametrize(("batch", "k", "cin", "cout", "side", "dtype", "tolerance"), [
    (6, 3, 3, 5, 8, jnp.float32, 1e-5),   # 6 images: slices of 3, not 4
    (7, 2, 4, 3, 6, jnp.float32, 1e-5),   # an even kernel: 'same' pads 0 before, 1 after
    (8, 5, 2, 4, 9, jnp.float32, 1e-5),
    (4, 3, 4, 4, 8, jnp.bfloat16, 2e-2),  # the mixed-precision recipes' type
])
def test_the_forward_pass_and_both_gradients_are_xlas(batch, k, cin, cout, side, dtype,
                                                       tolerance):
    rng = np.random.default_rng(0)
    x = jnp.asarray(rng.standard_normal((batch, side, side, cin)), dtype)
    kernel = jnp.asarray(rng.standard_normal((k, k, cin, cout)), dtype)
    grad = jnp.asarray(rng.standard_normal((batch, side, side, cout)), dtype)
    ours, our_vjp = jax.vjp(jax.jit(conv), x, kernel)
    theirs, their_vjp = jax.vjp(_xla, x, kernel)
    pairs = [(ours, theirs), *zip(our_vjp(grad), their_vjp(grad), strict=True)]
    for mine, xla in pairs:
        assert mine.shape == xla.shape and mine.dtype == xla.dtype
        scale = float(jnp.max(jnp.abs(xla.astype(jnp.float32))))
        error = float(jnp.max(jnp.abs((mine - xla).astype(jnp.float32))))
        assert error <= tolerance * scale, (error, scale)
