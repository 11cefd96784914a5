"""What a framework's generation operations give the generation scenario to time
(dlbench.scenarios.generation_ops.GenerationOps.decoder): callables, no framework; as a
training step in parts is dlbench.measure.parts's."""

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

# What a recipe's `how` adds where the framework's language-model head computes the last
# position's logits only, the ones generate chooses from (PyTorch's generate asks its model
# for them alone; TensorFlow's and JAX's ops cut their heads to them).
HEAD_ON_LAST_POSITION = "the head on the last position only"


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
