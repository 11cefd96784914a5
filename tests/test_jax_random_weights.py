"""JAX's random weights, as a cell without a weights file builds its model, are drawn by one
compiled program (dlbench.frameworks.jax.inference.random_params): the draws of the Flax
class's own initialization for the seed, which runs the model op by op, to within one
float32 rounding (the compiled program fuses the draws' scaling: about a quarter of the
values differ by one unit in the last place)."""

import subprocess
import sys

import pytest

from tests.conftest import tool_env

# In a process of its own: the JAX backend sets transformers' environment (USE_TORCH=0),
# which the test worker's later PyTorch children would inherit.
COMPARE = """
import numpy as np
from flax.traverse_util import flatten_dict

from dlbench.catalogue import recipes
from dlbench.catalogue.models import get_model
from dlbench.frameworks import load_backend, load_ops

ops = load_ops(load_backend("jax", "cpu", 1, 1), "inference")  # the backend first
import transformers

spec, eager = get_model("tiny-bert"), recipes.optimization("inference", "eager", "jax")
own = flatten_dict(transformers.FlaxBertModel(transformers.BertConfig(**spec.params),
                                              seed=3).params)
drawn = flatten_dict(ops.build(spec, 3, eager).params)  # as a cell without a weights file
other = flatten_dict(ops.build(spec, 4, eager).params)
assert own.keys() == drawn.keys(), own.keys() ^ drawn.keys()
for key, value in own.items():
    assert value.shape == drawn[key].shape, key
    np.testing.assert_array_max_ulp(np.asarray(value), np.asarray(drawn[key]), maxulp=1)
# Weights drawn at random, not biases and norms, differ with the seed.
kernels = [key for key in own if key[-1] in ("kernel", "embedding")]
assert kernels and not any(np.array_equal(np.asarray(drawn[key]), np.asarray(other[key]))
                           for key in kernels)
print(len(own), "parameters equal")
"""


@pytest.mark.slow
def test_random_weights_are_the_flax_classes_own_for_the_seed():
    done = subprocess.run([sys.executable, "-c", COMPARE], capture_output=True, text=True,
                          timeout=300, env=tool_env())
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    assert "parameters equal" in done.stdout, done.stdout
