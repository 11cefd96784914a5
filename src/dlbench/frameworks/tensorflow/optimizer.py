"""The optimizer of every TensorFlow training scenario, in Keras, with the other frameworks'
arithmetic: SGD with momentum, or Adam (betas 0.9, 0.999, epsilon 1e-7) with epsilon added to
the bias-corrected √v̂ as PyTorch's and optax's Adam add it — not Keras's default, which adds
it to the uncorrected √v ("epsilon hat", Kingma and Ba's formula before their section 2.1),
an epsilon larger by 1/√(1 − β₂ᵗ) (×31.6 at the first step) and so a different update
wherever √v̂ is not far above it (tests/test_adam.py: up to 23% of a step apart on
gradients of 1e-5 to 0.1).

Both Keras classes are kept — tf_keras's Adam (ops per variable) and the legacy one (one
C++ kernel per variable, ResourceApplyAdam; the legacy-optimizer recipe) — and given
epsilon × √(1 − β₂ᵗ) as their epsilon hat, which is the same update:
lr·√(1−β₂ᵗ)/(1−β₁ᵗ) · m / (√v + ε√(1−β₂ᵗ)) = lr/(1−β₁ᵗ) · m / (√v/√(1−β₂ᵗ) + ε)."""

# The backend first: it sets the environment (tf.keras is tf_keras) that the framework
# reads when it loads.
import dlbench.frameworks.tensorflow.backend  # noqa: F401

# isort: split

import tensorflow as tf

from dlbench.catalogue.optimizers import Optimizer
from dlbench.catalogue.recipes import Optimization

EPSILON = 1e-7


class LegacyAdam(tf.keras.optimizers.legacy.Adam):
    """tf.keras.optimizers.legacy.Adam (ResourceApplyAdam, one kernel per variable) whose
    epsilon is added to √v̂: the kernel's epsilon is ε × √(1 − β₂ᵗ) at every step (the
    adaptive epsilon that tf_keras's own Adam offers and the legacy class does not)."""

    def _prepare_local(self, var_device, var_dtype, apply_state):
        super()._prepare_local(var_device, var_dtype, apply_state)
        coefficients = apply_state[(var_device, var_dtype)]
        coefficients["epsilon"] = coefficients["epsilon"] * tf.sqrt(
            1 - coefficients["beta_2_power"])


def make_optimizer(optimizer: Optimizer, learning_rate: float,
                   optimization: Optimization) -> tf.keras.optimizers.Optimizer:
    """Keras's SGD with momentum or Adam (epsilon added to √v̂) — the legacy classes for the
    legacy-optimizer recipe —, wrapped for loss scaling in fp16 (as PyTorch's GradScaler)."""
    legacy = optimization.recipe.name == "legacy-optimizer"
    optimizers = tf.keras.optimizers.legacy if legacy else tf.keras.optimizers
    if optimizer.name == "sgd":
        opt = optimizers.SGD(learning_rate, momentum=optimizer.momentum)
    elif legacy:
        opt = LegacyAdam(learning_rate, beta_1=0.9, beta_2=0.999, epsilon=EPSILON)
    else:
        opt = optimizers.Adam(learning_rate, beta_1=0.9, beta_2=0.999, epsilon=EPSILON,
                              adaptive_epsilon=True)
    if optimization.precision.name == "fp16":
        opt = tf.keras.mixed_precision.LossScaleOptimizer(opt)
    return opt


def is_legacy(opt) -> bool:
    """Whether `opt` (or the optimizer a loss-scale optimizer wraps) is a legacy one."""
    inner = getattr(opt, "inner_optimizer", opt)
    return isinstance(inner, tf.keras.optimizers.legacy.Optimizer)
