"""Adam is the same arithmetic in every framework: the optimizer that each framework's
training scenarios build (make_optimizer, recipe by recipe), given the same weights and the
same gradients, takes the same steps to float32 rounding — and Keras's own Adam, which adds
epsilon to the uncorrected √v ("epsilon hat"), does not. Each framework runs in a process
of its own."""

import subprocess
import sys

import numpy as np
import pytest

from dlbench.catalogue.optimizers import OPTIMIZERS
from tests.conftest import tool_env

LR = OPTIMIZERS["adam"].learning_rate
SHAPES, STEPS = ((64,), (16, 8)), 4

# Each script: argv[1] the weights w<i> and gradients g<step>_<i>; argv[2] the weights after
# every step of every variant, keyed "<variant>/<step>/<i>".
PYTORCH = f"""
import sys
import numpy as np
import torch
from dlbench.catalogue.optimizers import OPTIMIZERS
from dlbench.catalogue.recipes import optimization
from dlbench.frameworks.pytorch.training import make_optimizer
d, out = np.load(sys.argv[1]), {{}}
for recipe in ("eager", "foreach", "fused"):
    params = torch.nn.ParameterList(torch.nn.Parameter(torch.from_numpy(d[f"w{{i}}"].copy()))
                                    for i in range({len(SHAPES)}))
    opt = make_optimizer(params, OPTIMIZERS["adam"], {LR},
                         optimization("train_step", recipe, "pytorch"))
    for t in range({STEPS}):
        for i, p in enumerate(params):
            p.grad = torch.from_numpy(d[f"g{{t}}_{{i}}"].copy())
        opt.step()
        for i, p in enumerate(params):
            out[f"pytorch {{recipe}}/{{t}}/{{i}}"] = p.detach().numpy().copy()
np.savez(sys.argv[2], **out)
"""

TENSORFLOW = f"""
import sys
import numpy as np
from dlbench.frameworks.tensorflow.optimizer import make_optimizer  # tf.keras is tf_keras
import tensorflow as tf
from dlbench.catalogue.optimizers import OPTIMIZERS
from dlbench.catalogue.recipes import optimization
d, out = np.load(sys.argv[1]), {{}}
for variant in ("eager", "graph", "xla", "legacy-optimizer", "stock", "stock-legacy"):
    variables = [tf.Variable(d[f"w{{i}}"]) for i in range({len(SHAPES)})]
    if variant == "stock":  # Keras's own Adam, as dlbench built it before
        opt = tf.keras.optimizers.Adam({LR}, epsilon=1e-7)
    elif variant == "stock-legacy":
        opt = tf.keras.optimizers.legacy.Adam({LR}, epsilon=1e-7)
    else:
        opt = make_optimizer(OPTIMIZERS["adam"], {LR},
                             optimization("train_step", variant, "tensorflow"))
    apply = lambda grads: opt.apply_gradients(zip(grads, variables))
    if variant in ("graph", "xla"):
        apply = tf.function(apply, jit_compile=variant == "xla")
    for t in range({STEPS}):
        apply([tf.constant(d[f"g{{t}}_{{i}}"]) for i in range({len(SHAPES)})])
        for i, v in enumerate(variables):
            out[f"tensorflow {{variant}}/{{t}}/{{i}}"] = v.numpy()
np.savez(sys.argv[2], **out)
"""

JAX = f"""
import sys
import jax
import jax.numpy as jnp
import numpy as np
import optax
from dlbench.catalogue.optimizers import OPTIMIZERS
from dlbench.frameworks.jax.optimizer import make_optimizer
d, out = np.load(sys.argv[1]), {{}}
opt = make_optimizer(OPTIMIZERS["adam"], {LR})
def step(grads, state, params):
    updates, state = opt.update(grads, state, params)
    return optax.apply_updates(params, updates), state
for variant, run in (("eager", step), ("jit", jax.jit(step))):
    params = [jnp.asarray(d[f"w{{i}}"]) for i in range({len(SHAPES)})]
    state = opt.init(params)
    for t in range({STEPS}):
        params, state = run([jnp.asarray(d[f"g{{t}}_{{i}}"]) for i in range({len(SHAPES)})],
                            state, params)
        for i, p in enumerate(params):
            out[f"jax {{variant}}/{{t}}/{{i}}"] = np.asarray(p)
np.savez(sys.argv[2], **out)
"""

AGREE = ["pytorch foreach", "pytorch fused", "tensorflow eager", "tensorflow graph",
         "tensorflow xla", "tensorflow legacy-optimizer", "jax eager", "jax jit"]
STOCK = ["tensorflow stock", "tensorflow stock-legacy"]


@pytest.fixture(scope="module")
def steps(tmp_path_factory) -> tuple[dict, dict]:
    """The inputs (weights ~0.1, gradients of 1e-5 to 0.1 in magnitude, both signs, new
    every step) and every variant's weights after each step."""
    folder = tmp_path_factory.mktemp("adam")
    rng = np.random.default_rng(0)
    inputs = {f"w{i}": (0.1 * rng.standard_normal(s)).astype(np.float32)
              for i, s in enumerate(SHAPES)}
    inputs |= {f"g{t}_{i}": (rng.choice([-1, 1], s) * 10 ** rng.uniform(-5, -1, s)
                             ).astype(np.float32)
               for t in range(STEPS) for i, s in enumerate(SHAPES)}
    np.savez(folder / "inputs.npz", **inputs)
    found = {}
    for name, code in (("pytorch", PYTORCH), ("tensorflow", TENSORFLOW), ("jax", JAX)):
        done = subprocess.run([sys.executable, "-c", code, str(folder / "inputs.npz"),
                               str(folder / f"{name}.npz")],
                              capture_output=True, text=True, timeout=300, env=tool_env())
        assert done.returncode == 0, done.stderr[-3000:]
        found |= dict(np.load(folder / f"{name}.npz"))
    return inputs, found


def apart(found: dict, inputs: dict, variant: str, step: int) -> float:
    """How far `variant`'s weights after `step` (0-based) are from PyTorch eager's, in float32
    rounding: in units of 2 ulps of the largest weight per step taken (≤ 1: the same)."""
    largest = max(np.abs(w).max() for w in (inputs["w0"], inputs["w1"]))
    tolerance = 2 * (step + 1) * np.spacing(np.float32(largest))
    return max(np.abs(found[f"{variant}/{step}/{i}"].astype(np.float64)
                      - found[f"pytorch eager/{step}/{i}"]).max()
               for i in range(len(SHAPES))) / tolerance


@pytest.mark.slow
@pytest.mark.parametrize("variant", AGREE)
def test_every_frameworks_adam_takes_the_same_steps(steps, variant):
    """PyTorch's (for-loop, foreach, fused), TensorFlow's (eager, graph, XLA, the legacy
    kernel) and optax's Adam (eager, jit), each as its training scenarios build it, agree with
    PyTorch eager's weights after one step and after each of four, to float32 rounding."""
    inputs, found = steps
    for step in range(STEPS):
        assert apart(found, inputs, variant, step) <= 1, (variant, step)
    # The steps are not vanishing: each moved the weights by far more than the tolerance.
    moved = np.abs(found[f"{variant}/0/0"] - inputs["w0"]).max()
    assert moved > 0.5 * LR


@pytest.mark.slow
@pytest.mark.parametrize("variant", STOCK)
def test_keras_own_adam_takes_other_steps(steps, variant):
    """Keras's own Adam (epsilon added to the uncorrected √v) is apart from the first step:
    the comparison above fails for it."""
    inputs, found = steps
    assert apart(found, inputs, variant, 0) > 100
    # Its update differs most where a gradient is small beside its epsilon hat, 1e-7/√0.001.
    update = found[f"{variant}/0/0"].astype(np.float64) - inputs["w0"]
    expected = found["pytorch eager/0/0"].astype(np.float64) - inputs["w0"]
    assert np.abs(update - expected).max() > 0.1 * LR
