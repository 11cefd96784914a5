"""What the generation scenario asks of a framework: the operations that its folder's
`generation` module implements (`make_ops(backend)` returns them), and nothing else.

A model, its inputs and the generated ids are the framework's own objects: the scenario
only hands them back to these operations.
"""

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    import numpy as np

    from dlbench.catalogue.models import ModelSpec
    from dlbench.catalogue.recipes import Optimization


@dataclass
class Decoder:
    """A recipe's greedy generation of a fixed number of new tokens, ready to time.

    `call` generates once (compilation happens at its first call) and returns the
    framework's ids. `first` is generate()'s first step as a call of its own, through the
    same recipe (compiled alike): the prompt's forward pass with the key-value cache
    generate gives it, and the greedy choice — the time to the first token, defined alike
    in every framework. Where the framework exposes each decoding step, `stamps` returns
    the host times (time.perf_counter, after the device's synchronization) at which the
    last call's steps had their logits, one per new token (None elsewhere)."""

    call: Callable[[], Any]
    how: str
    first: Callable[[], Any]
    stamps: Callable[[], list[float]] | None = None
    # How many times the recipe's function was traced so far (None: not traced).
    traces: Callable[[], int] | None = None
    # Generate once with other prompt inputs (ops.inputs of other ids) through the same
    # compiled functions, and the count of the recipe's compiled programs (traces, graphs)
    # so far, with what it counts: together they tell whether another prompt length
    # compiles anew. None where the recipe compiles nothing.
    call_with: Callable[[dict], Any] | None = None
    compilations: Callable[[], int] | None = None
    counted: str = ""


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
