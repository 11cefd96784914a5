"""The optimizer of every JAX training scenario, in optax, with the other frameworks'
hyper-parameters: SGD with momentum (PyTorch's form: the velocity accumulates gradients,
the step is −lr × velocity; no Nesterov) or Adam (betas 0.9, 0.999, epsilon 1e-7, Keras's
default, added to √v̂ as in PyTorch); and fp16's dynamic loss scaling, as PyTorch's
GradScaler (optax has none)."""

import jax
import jax.numpy as jnp
import optax

from dlbench.catalogue.optimizers import LearningRate, Optimizer

# PyTorch's GradScaler: the first scale, and after how many finite steps it doubles (it
# halves after a step with inf/NaN gradients, which is skipped).
INITIAL_SCALE, GROWTH_INTERVAL = 2.0**16, 2000


def make_optimizer(optimizer: Optimizer,
                   learning_rate: "float | optax.Schedule") -> optax.GradientTransformation:
    if optimizer.name == "sgd":
        return optax.sgd(learning_rate, momentum=optimizer.momentum, nesterov=False)
    return optax.adam(learning_rate, b1=0.9, b2=0.999, eps=1e-7, eps_root=0.0)


def schedule(rate: LearningRate) -> "float | optax.Schedule":
    """dlbench's learning rate as optax's: a function of the updates made before this one
    (the state's count), or a number where it is constant."""
    return (lambda count: rate.at(count, jnp.clip)) if rate.decaying else rate.rate


def describe(optimizer: Optimizer) -> str:
    """The optax transformation, in words."""
    if optimizer.name == "sgd":
        return f"optax.sgd(momentum={optimizer.momentum})"
    return "optax.adam(b1=0.9, b2=0.999, eps=1e-7)"


def scaled_update(opt: optax.GradientTransformation, grads, opt_state, params, scale,
                  good_steps):
    """The update from gradients of a loss multiplied by `scale`: unscaled, applied when
    all are finite (else the step is skipped), and the scale adapted as GradScaler does.
    Returns the parameters, the optimizer state, the scale and the finite steps since it
    last grew."""
    grads = jax.tree.map(lambda g: g / scale, grads)
    updates, new_state = opt.update(grads, opt_state, params)
    new_params = optax.apply_updates(params, updates)
    finite = jnp.all(jnp.array([jnp.all(jnp.isfinite(g)) for g in jax.tree.leaves(grads)]))
    keep = lambda new, old: jax.tree.map(lambda a, b: jnp.where(finite, a, b), new, old)  # noqa: E731
    grown = good_steps + 1 == GROWTH_INTERVAL
    scale = jnp.where(finite, jnp.where(grown, scale * 2, scale), scale / 2)
    good_steps = jnp.where(finite & ~grown, good_steps + 1, 0)
    # A skipped step keeps the optimizer's state, but the schedule counts it, as PyTorch's
    # schedulers (stepped every iteration) and Keras's iterations (advanced by its loss
    # scaling's skipped steps) count it.
    counted = lambda x: isinstance(x, optax.ScaleByScheduleState)  # noqa: E731
    state = jax.tree.map(lambda new, old: new if counted(new) else old,
                         new_state, keep(new_state, opt_state), is_leaf=counted)
    return keep(new_params, params), state, scale, good_steps
