"""What the training scenario asks of a framework: the operations that its folder's
`training` module implements (`make_ops(backend)` returns them), and nothing else.

A model and its optimizer are the framework's own objects: the scenario only hands them
back to these operations.
"""

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    import numpy as np

    from dlbench.catalogue.models.vision import CNN
    from dlbench.catalogue.optimizers import LearningRate, Optimizer
    from dlbench.catalogue.recipes import Optimization
    from dlbench.data.pipeline import Pipeline
    from dlbench.measure.training import TrainingStep


class TrainingOps(Protocol):
    """A framework's training of the CNN from image files (dlbench.scenarios.training)."""

    def build(self, spec: "CNN", weights: "dict[str, np.ndarray]",
              optimization: "Optimization") -> Any:
        """The CNN on the device with the given (canonical-layout) initial weights."""
        ...

    def optimizer(self, model: Any, optimizer: "Optimizer", learning_rate: "LearningRate",
                  optimization: "Optimization") -> Any:
        """The framework's optimizer of the model's parameters, its learning rate at each
        update `learning_rate.at(steps taken before it)` (a step that fp16's loss scaling
        skipped counts)."""
        ...

    def pipeline(self, manifest: dict, pipeline: "Pipeline", batch: int,
                 seed: int) -> Callable[[int], Iterator]:
        """A function of the epoch that gives that epoch's batches of (images, labels)."""
        ...

    def train_step(self, model: Any, opt: Any, optimization: "Optimization"
                   ) -> "TrainingStep":
        """The training step in the recipe, in parts (dlbench.measure.training.TrainingStep)."""
        ...

    def mean_loss(self, losses: list) -> float:
        """The mean of the losses that steps returned (read once, after the epoch)."""
        ...

    def logits(self, model: Any, images: "np.ndarray", manifest: dict) -> "np.ndarray":
        """Logits of uint8 NHWC images, normalised as in training, with dropout off."""
        ...

    def compilation(self) -> dict | None:
        """The compiler's graphs, breaks and recompilations of the cell (None: none)."""
        ...

    def release(self) -> None:
        """Leave the process as the cell found it (global modes, caches)."""
        ...
