"""What the inference scenario asks of a framework: the operations that its folder's
`inference` module implements (`make_ops(backend)` returns them), and nothing else.

A model, its inputs and a step's output are the framework's own objects: the scenario only
hands them back to these operations.
"""

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    import numpy as np

    from dlbench.catalogue.models import ModelSpec
    from dlbench.catalogue.recipes import Optimization

# A recipe: (model, inputs, optimization) → the step that the timed loop calls, returning
# the model's output (tracing and compilation happen when the recipe is applied).
Recipe = Callable[[Any, dict, "Optimization"], Callable[[], Any]]


class InferenceOps(Protocol):
    """A framework's inference of a registry transformer (dlbench.scenarios.inference)."""

    # Each recipe of the framework's optimizations, by name (dlbench.catalogue.recipes).
    recipes: Mapping[str, Recipe]

    def build(self, spec: "ModelSpec", seed: int, optimization: "Optimization",
              weights: Path | None = None, attention: str = "sdpa") -> Any:
        """The model on the device: the shared weights if given, else random from `seed`."""
        ...

    def inputs(self, token_ids: "np.ndarray") -> dict:
        """The model's inputs on the device: the token ids and an all-ones attention mask."""
        ...

    def same_attention_work(self, model: Any, inputs: dict) -> None:
        """Make every recipe do eager's attention work on these inputs."""
        ...

    def to_numpy(self, output: Any) -> "np.ndarray":
        """A step's output (the last hidden state) as a float32 array on the host."""
        ...

    def attention(self, model: Any) -> dict:
        """The attention implementation that ran and whether the mask was applied."""
        ...

    def compilation(self) -> dict | None:
        """The compiler's graphs, breaks and recompilations of the cell (None: none)."""
        ...

    def precision_ops(self, model: Any, inputs: dict, optimization: "Optimization") -> dict:
        """Which ops computed in float32 and which in the reduced type, in one call."""
        ...

    def release(self) -> None:
        """Leave the process as the cell found it (global modes, caches, patches)."""
        ...

    def versions(self) -> dict[str, str]:
        """Versions of what the operations use besides the framework (transformers)."""
        ...


class ReferenceOps(InferenceOps, Protocol):
    """The reference framework's inference (dlbench.reference): it also writes the shared
    seeded weights that every framework loads."""

    def save_weights(self, model: Any, path: Path) -> None:
        """Write the model's weights as `path` (model.safetensors), readable by all."""
        ...
