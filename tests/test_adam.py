"""SGD with momentum and Adam are the same arithmetic in every framework: the optimizer that
each framework's training scenarios build (make_optimizer, recipe by recipe), given the same
weights, the same gradients and the same learning rate at each step — constant, or falling
as the training scenario's last epoch has it (catalogue.optimizers.LearningRate) —, takes
the same steps to float32 rounding. Keras's own Adam, which adds epsilon to the
uncorrected √v ("epsilon hat"), does not; nor does Keras's own SGD once the rate falls (its
velocity sums rate-scaled gradients). Each framework runs in a process of its own."""

import subprocess
import sys

import numpy as np
import pytest

from dlbench.catalogue.optimizers import OPTIMIZERS
from tests.conftest import one_framework, tool_env

SHAPES, STEPS = ((64,), (16, 8)), 4
# Constant for two steps, then falling (2/3, 1/3 of the rate): each framework's own way of
# taking a schedule, as its training scenario hands it over.
FALLING = f"LearningRate(OPTIMIZERS[name].learning_rate, {STEPS}, {STEPS - 1})"

# Each script: argv[1] the weights w<i> and gradients g<step>_<i>; argv[2] the weights after
# every step of every variant, keyed "<optimizer> <framework> <variant>/<step>/<i>".
PYTORCH = f"""
import sys
import numpy as np
import torch
from dlbench.catalogue.optimizers import OPTIMIZERS, LearningRate
from dlbench.catalogue.recipes import optimization
from dlbench.frameworks.pytorch.training import make_optimizer, set_rate
d, out = np.load(sys.argv[1]), {{}}
for name in ("adam", "sgd"):
    rate = {FALLING}
    for recipe in ("eager", "foreach", "fused"):
        params = torch.nn.ParameterList(torch.nn.Parameter(torch.from_numpy(d[f"w{{i}}"].copy()))
                                        for i in range({len(SHAPES)}))
        opt = make_optimizer(params, OPTIMIZERS[name], rate.rate,
                             optimization("train_step", recipe, "pytorch"))
        for t in range({STEPS}):
            for i, p in enumerate(params):
                p.grad = torch.from_numpy(d[f"g{{t}}_{{i}}"].copy())
            set_rate(opt, rate.at(t))  # as the training step sets it before each update
            opt.step()
            for i, p in enumerate(params):
                out[f"{{name}} pytorch {{recipe}}/{{t}}/{{i}}"] = p.detach().numpy().copy()
np.savez(sys.argv[2], **out)
"""

TENSORFLOW = f"""
import sys
import numpy as np
from dlbench.frameworks.tensorflow.optimizer import Schedule, make_optimizer  # tf_keras
import tensorflow as tf
from dlbench.catalogue.optimizers import OPTIMIZERS, LearningRate
from dlbench.catalogue.recipes import optimization
d, out = np.load(sys.argv[1]), {{}}
for name in ("adam", "sgd"):
    rate = {FALLING}
    for variant in ("eager", "graph", "xla", "legacy-optimizer", "stock", "stock-legacy"):
        variables = [tf.Variable(d[f"w{{i}}"]) for i in range({len(SHAPES)})]
        if variant.startswith("stock"):  # Keras's own class, as dlbench built it before
            keras = tf.keras.optimizers.legacy if variant == "stock-legacy" \\
                else tf.keras.optimizers
            opt = keras.Adam(Schedule(rate), epsilon=1e-7) if name == "adam" else \\
                keras.SGD(Schedule(rate), momentum=OPTIMIZERS[name].momentum)
        else:
            opt = make_optimizer(OPTIMIZERS[name], Schedule(rate),
                                 optimization("train_step", variant, "tensorflow"))
        apply = lambda grads: opt.apply_gradients(zip(grads, variables))
        if variant in ("graph", "xla"):
            apply = tf.function(apply, jit_compile=variant == "xla")
        for t in range({STEPS}):
            apply([tf.constant(d[f"g{{t}}_{{i}}"]) for i in range({len(SHAPES)})])
            for i, v in enumerate(variables):
                out[f"{{name}} tensorflow {{variant}}/{{t}}/{{i}}"] = v.numpy()
np.savez(sys.argv[2], **out)
"""

JAX = f"""
import sys
import jax
import jax.numpy as jnp
import numpy as np
import optax
from dlbench.catalogue.optimizers import OPTIMIZERS, LearningRate
from dlbench.frameworks.jax.optimizer import make_optimizer, schedule
d, out = np.load(sys.argv[1]), {{}}
for name in ("adam", "sgd"):
    opt = make_optimizer(OPTIMIZERS[name], schedule({FALLING}))
    def step(grads, state, params):
        updates, state = opt.update(grads, state, params)
        return optax.apply_updates(params, updates), state
    for variant, run in (("eager", step), ("jit", jax.jit(step))):
        params = [jnp.asarray(d[f"w{{i}}"]) for i in range({len(SHAPES)})]
        state = opt.init(params)
        for t in range({STEPS}):
            params, state = run([jnp.asarray(d[f"g{{t}}_{{i}}"])
                                 for i in range({len(SHAPES)})], state, params)
            for i, p in enumerate(params):
                out[f"{{name}} jax {{variant}}/{{t}}/{{i}}"] = np.asarray(p)
np.savez(sys.argv[2], **out)
"""

AGREE = ["pytorch foreach", "pytorch fused", "tensorflow eager", "tensorflow graph",
         "tensorflow xla", "tensorflow legacy-optimizer", "jax eager", "jax jit"]
STOCK = ["tensorflow stock", "tensorflow stock-legacy"]
BOTH = ["adam", "sgd"]


@pytest.fixture(scope="module")
def steps(tmp_path_factory) -> tuple[dict, dict]:
    """The inputs (weights ~0.1, gradients of 1e-5 to 0.1 in magnitude, both signs, new
    every step) and every variant's weights after each step."""
    folder = tmp_path_factory.mktemp("optimizers")
    rng = np.random.default_rng(0)
    inputs = {f"w{i}": (0.1 * rng.standard_normal(s)).astype(np.float32)
              for i, s in enumerate(SHAPES)}
    inputs |= {f"g{t}_{i}": (rng.choice([-1, 1], s) * 10 ** rng.uniform(-5, -1, s)
                             ).astype(np.float32)
               for t in range(STEPS) for i, s in enumerate(SHAPES)}
    np.savez(folder / "inputs.npz", **inputs)
    found = {}
    for name, code in (("pytorch", PYTORCH), ("tensorflow", TENSORFLOW), ("jax", JAX)):
        done = subprocess.run([sys.executable, "-c", one_framework(name, code),
                               str(folder / "inputs.npz"),
                               str(folder / f"{name}.npz")],
                              capture_output=True, text=True, timeout=300, env=tool_env())
        assert done.returncode == 0, done.stderr[-3000:]
        found |= dict(np.load(folder / f"{name}.npz"))
    return inputs, found


def tolerance(inputs: dict, step: int) -> float:
    """2 ulps of the largest weight per step taken (0-based `step`)."""
    largest = max(np.abs(w).max() for w in (inputs["w0"], inputs["w1"]))
    return 2 * (step + 1) * np.spacing(np.float32(largest))


def apart(found: dict, inputs: dict, variant: str, step: int) -> float:
    """How far `variant`'s weights after `step` are from PyTorch eager's (of the same
    optimizer), in float32 rounding: in units of `tolerance` (≤ 1: the same)."""
    name = variant.partition(" ")[0]
    return max(np.abs(found[f"{variant}/{step}/{i}"].astype(np.float64)
                      - found[f"{name} pytorch eager/{step}/{i}"]).max()
               for i in range(len(SHAPES))) / tolerance(inputs, step)


def moved(found: dict, inputs: dict, key: str, step: int) -> float:
    """How far a step moved the weights, in units of `tolerance`."""
    before = inputs["w0"] if step == 0 else found[f"{key}/{step - 1}/0"]
    return np.abs(found[f"{key}/{step}/0"] - before).max() / tolerance(inputs, step)


@pytest.mark.slow
@pytest.mark.parametrize("optimizer", BOTH)
@pytest.mark.parametrize("variant", AGREE)
def test_every_frameworks_optimizer_takes_the_same_steps(steps, optimizer, variant):
    """PyTorch's (for-loop, foreach, fused), TensorFlow's (eager, graph, XLA, the legacy
    kernel) and optax's SGD and Adam (eager, jit), each as its training scenarios build it,
    agree with PyTorch eager's weights after each of four steps, to float32 rounding — the
    last two at a falling rate."""
    inputs, found = steps
    for step in range(STEPS):
        assert apart(found, inputs, f"{optimizer} {variant}", step) <= 1, (variant, step)
        # No step vanished: each moved the weights by far more than the tolerance.
        assert moved(found, inputs, f"{optimizer} {variant}", step) > 100, step


@pytest.mark.slow
@pytest.mark.parametrize("variant", STOCK)
def test_keras_own_adam_takes_other_steps(steps, variant):
    """Keras's own Adam (epsilon added to the uncorrected √v) is apart from the first step:
    the comparison above fails for it."""
    inputs, found = steps
    assert apart(found, inputs, f"adam {variant}", 0) > 100
    # Its update differs most where a gradient is small beside its epsilon hat, 1e-7/√0.001.
    update = found[f"adam {variant}/0/0"].astype(np.float64) - inputs["w0"]
    expected = found["adam pytorch eager/0/0"].astype(np.float64) - inputs["w0"]
    lr = OPTIMIZERS["adam"].learning_rate
    assert np.abs(update - expected).max() > 0.1 * lr


@pytest.mark.slow
@pytest.mark.parametrize("variant", STOCK)
def test_keras_own_sgd_takes_other_steps_once_the_rate_falls(steps, variant):
    """Keras's own SGD (its velocity sums rate-scaled gradients) takes PyTorch's steps at a
    constant rate and other ones from the first step at a falling rate: the comparison above
    fails for it there."""
    inputs, found = steps
    for step in range(2):  # constant
        assert apart(found, inputs, f"sgd {variant}", step) <= 1, step
    assert apart(found, inputs, f"sgd {variant}", 2) > 100
