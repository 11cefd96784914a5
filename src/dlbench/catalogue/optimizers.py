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
