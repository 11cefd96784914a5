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
lr·√(1−β₂ᵗ)/(1−β₁ᵗ) · m / (√v + ε√(1−β₂ᵗ)) = lr/(1−β₁ᵗ) · m / (√v/√(1−β₂ᵗ) + ε).

SGD with momentum: Keras's velocity sums rate-scaled gradients, PyTorch's and optax's sum the
gradients and the rate scales the step — the same steps at a constant rate, other ones while
it falls (the training scenario's last epoch). Under a falling rate (a `Schedule`) `SGD` and
`LegacySGD` take PyTorch's form (tests/test_adam.py)."""

# The backend first: it sets the environment (tf.keras is tf_keras) that the framework
# reads when it loads.
import dlbench.frameworks.tensorflow.backend  # noqa: F401

# isort: split

import tensorflow as tf

from dlbench.catalogue.optimizers import LearningRate, Optimizer
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


class SGD(tf.keras.optimizers.SGD):
    """tf_keras's SGD with momentum in PyTorch's and optax's form: the velocity sums the
    gradients (v = μv + g) and each update takes the rate of its step (w -= η_t·v). Keras's
    own velocity sums rate-scaled gradients (v = μv − η_t·g; w += v): the same steps at a
    constant rate, other ones while the rate falls (the last epoch, by default)."""

    def update_step(self, gradient, variable):
        lr = tf.cast(self.learning_rate, variable.dtype)
        momentum = tf.cast(self.momentum, variable.dtype)
        velocity = self.momentums[self._index_dict[self._var_key(variable)]]
        velocity.assign(velocity * momentum)
        if isinstance(gradient, tf.IndexedSlices):
            velocity.scatter_add(gradient)
        else:
            velocity.assign_add(gradient)
        variable.assign_sub(lr * velocity)


class LegacySGD(tf.keras.optimizers.legacy.SGD):
    """The legacy SGD (one C++ kernel per variable) in the same form: ResourceApplyMomentum
    (accum = μ·accum + g; var -= lr·accum) where Keras runs ResourceApplyKerasMomentum."""

    def _coefficients(self, var, apply_state):
        key = (var.device, var.dtype.base_dtype)
        return (apply_state or {}).get(key) or self._fallback_apply_state(*key)

    def _resource_apply_dense(self, grad, var, apply_state=None):
        c = self._coefficients(var, apply_state)
        return tf.raw_ops.ResourceApplyMomentum(
            var=var.handle, accum=self.get_slot(var, "momentum").handle, lr=c["lr_t"],
            grad=grad, momentum=c["momentum"], use_locking=self._use_locking,
            use_nesterov=False)

    def _resource_apply_sparse(self, grad, var, indices, apply_state=None):
        c = self._coefficients(var, apply_state)
        return tf.raw_ops.ResourceSparseApplyMomentum(
            var=var.handle, accum=self.get_slot(var, "momentum").handle, lr=c["lr_t"],
            grad=grad, indices=indices, momentum=c["momentum"],
            use_locking=self._use_locking, use_nesterov=False)


class Schedule(tf.keras.optimizers.schedules.LearningRateSchedule):
    """dlbench's learning rate (catalogue.optimizers.LearningRate) of the optimizer's
    iterations, the updates made before this one (Keras counts them as the others do)."""

    def __init__(self, rate: LearningRate):
        self.rate = rate

    def __call__(self, step):
        return self.rate.at(tf.cast(step, tf.float32), tf.clip_by_value)

    def get_config(self) -> dict:
        return {"rate": self.rate.rate, "steps": self.rate.steps,
                "decaying": self.rate.decaying}

    @classmethod
    def from_config(cls, config: dict) -> "Schedule":
        return cls(LearningRate(**config))


def schedule(rate: LearningRate) -> "float | Schedule":
    """dlbench's learning rate as Keras's: a schedule of the iterations, or a number where
    it is constant."""
    return Schedule(rate) if rate.decaying else rate.rate


def make_optimizer(optimizer: Optimizer, learning_rate: "float | Schedule",
                   optimization: Optimization) -> tf.keras.optimizers.Optimizer:
    """Keras's SGD with momentum (in PyTorch's form under a falling rate) or Adam (epsilon
    added to √v̂) — the legacy classes for the legacy-optimizer recipe —, wrapped for loss
    scaling in fp16 (as PyTorch's GradScaler)."""
    legacy = optimization.recipe.name == "legacy-optimizer"
    optimizers = tf.keras.optimizers.legacy if legacy else tf.keras.optimizers
    if optimizer.name == "sgd":
        # PyTorch's form where the rate changes; Keras's own, the same steps, where it does
        # not (the train_step scenario's, whose recorded kernels are Keras's).
        sgd = (LegacySGD if legacy else SGD) if isinstance(learning_rate, Schedule) \
            else optimizers.SGD
        opt = sgd(learning_rate, momentum=optimizer.momentum)
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
