"""What the train_step scenario asks of a framework: the operations that its folder's
`train_step` module implements (`make_ops(backend)` returns them), and nothing else.

A model, its inputs and its optimizer are the framework's own objects: the scenario only
hands them back to these operations.
"""

from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    import numpy as np

    from dlbench.catalogue.models import ModelSpec
    from dlbench.catalogue.optimizers import Optimizer
    from dlbench.catalogue.recipes import Optimization
    from dlbench.measure.parts import StepParts


class TrainStepOps(Protocol):
    """A framework's training step of a registry transformer with a tied language-model
    head (dlbench.scenarios.train_step)."""

    def build(self, spec: "ModelSpec", seed: int, optimization: "Optimization",
              weights: Path | None = None) -> Any:
        """The model on the device in training mode: the shared weights, else seeded."""
        ...

    def inputs(self, token_ids: "np.ndarray") -> dict:
        """The model's inputs on the device: the token ids and an all-ones attention mask."""
        ...

    def initial_loss(self, model: Any, inputs: dict,
                     optimization: "Optimization") -> float:
        """The loss before training, dropout off, in the cell's precision."""
        ...

    def word_embeddings(self, model: Any) -> "np.ndarray":
        """The tied head's weights (the input embeddings) as a float32 host array."""
        ...

    def optimizer(self, model: Any, optimizer: "Optimizer", learning_rate: float,
                  optimization: "Optimization") -> Any:
        """The framework's optimizer of the model's parameters."""
        ...

    def implementation(self, opt: Any, optimization: "Optimization") -> str:
        """Which implementation of the optimizer's update runs, in words."""
        ...

    def train_step(self, model: Any, opt: Any, inputs: dict,
                   optimization: "Optimization") -> "StepParts":
        """The step in its parts (dlbench.measure.parts.StepParts), each part a callable."""
        ...

    def losses(self, outputs: list) -> list[float]:
        """The losses the steps returned, as numbers (read once, after the loop)."""
        ...

    def compilation(self) -> dict | None:
        """The compiler's graphs, breaks and recompilations of the cell (None: none)."""
        ...

    def release(self) -> None:
        """Leave the process as the cell found it (global modes, caches)."""
        ...

    def versions(self) -> dict[str, str]:
        """Versions of what the operations use besides the framework (transformers)."""
        ...
