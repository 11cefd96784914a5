"""The optimizer of every JAX training scenario, in optax, with the other frameworks'
hyper-parameters: SGD with momentum (PyTorch's form: the velocity accumulates gradients,
the step is −lr × velocity; no Nesterov) or Adam (betas 0.9, 0.999, epsilon 1e-7, Keras's
default, added to √v̂ as in PyTorch)."""

import optax

from dlbench.catalogue.optimizers import Optimizer


def make_optimizer(optimizer: Optimizer, learning_rate: float) -> optax.GradientTransformation:
    if optimizer.name == "sgd":
        return optax.sgd(learning_rate, momentum=optimizer.momentum)
    return optax.adam(learning_rate, b1=0.9, b2=0.999, eps=1e-7)


def describe(optimizer: Optimizer) -> str:
    """The optax transformation, in words."""
    if optimizer.name == "sgd":
        return f"optax.sgd(momentum={optimizer.momentum})"
    return "optax.adam(b1=0.9, b2=0.999, eps=1e-7)"
