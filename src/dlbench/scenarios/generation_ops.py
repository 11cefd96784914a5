"""What the generation scenario asks of a framework: the operations that its folder's
`generation` module implements (`make_ops(backend)` returns them), and nothing else.

A model, its inputs and the generated ids are the framework's own objects: the scenario
only hands them back to these operations.
"""

from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from dlbench.measure.decoder import Decoder

if TYPE_CHECKING:
    import numpy as np

    from dlbench.catalogue.models import ModelSpec
    from dlbench.catalogue.recipes import Optimization


class GenerationOps(Protocol):
    """A framework's greedy text generation with a registry decoder and its language-model
    head (dlbench.scenarios.generation)."""

    def build(self, spec: "ModelSpec", seed: int, optimization: "Optimization",
              weights: Path | None = None, attention: str = "sdpa") -> Any:
        """The model with its language-model head (tied to the word embeddings) on the
        device, in the cell's precision: the shared weights if given, else seeded;
        `attention`: transformers' implementation where the framework has several
        (PyTorch: sdpa or eager; the others have the explicit one only)."""
        ...

    def inputs(self, token_ids: "np.ndarray") -> dict:
        """The prompt on the device: the token ids and an all-ones attention mask."""
        ...

    def decoder(self, model: Any, inputs: dict, new_tokens: int,
                optimization: "Optimization") -> Decoder:
        """Greedy decoding of exactly `new_tokens` tokens (no stop at the end-of-text
        token) under the optimization's recipe."""
        ...

    def new_ids(self, output: Any, prompt_length: int) -> "np.ndarray":
        """The generated token ids of a call's output (batch × new tokens), on the host."""
        ...

    def attention(self, model: Any) -> dict:
        """The attention that runs: transformers' implementation (`sdpa`, `eager`: the
        explicit matmul-softmax-matmul) and whose classes implement it."""
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
