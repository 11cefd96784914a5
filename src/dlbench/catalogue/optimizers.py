"""The optimizers of the training scenarios (SGD with momentum, Adam): an axis of their
own, the same in every framework."""

from dataclasses import dataclass
from types import MappingProxyType


@dataclass(frozen=True)
class Optimizer:
    name: str
    description: str
    learning_rate: float  # the default; the config may set another
    momentum: float | None = None


# The published setup trained with SGD, momentum 0.9, learning rate 0.01; Adam at its
# usual default learning rate.
OPTIMIZERS = MappingProxyType({
    o.name: o for o in (
        Optimizer("sgd", "SGD with momentum 0.9", 0.01, momentum=0.9),
        Optimizer("adam", "Adam (betas 0.9, 0.999; epsilon 1e-7 added to the bias-corrected "
                  "√v̂ in every framework)", 0.001),
    )
})


@dataclass(frozen=True)
class LearningRate:
    """The learning rate of every update, the same in every framework: `rate` until the last
    `decaying` of the `steps` updates, then falling linearly to zero (the last update at
    rate / decaying; the ablation's updates, undone after each block, at the rate of the
    moment). At a constant rate Adam moves a model by 1-2.5 points of test accuracy between
    epochs even near its plateau, so a final model would be a draw of that wander; decayed,
    it settles where the training led (config/README.md, `training.decay_epochs`)."""

    rate: float
    steps: int
    decaying: int = 0  # 0: constant

    def at(self, step, clip=lambda x, low, high: max(low, min(high, x))):
        """The rate of the update after `step` updates (a number, or a framework's array
        with that framework's `clip(x, low, high)`)."""
        if not self.decaying:
            return self.rate
        return self.rate * clip((self.steps - step) / self.decaying, 0.0, 1.0)
