"""Framework backends, one module each, behind one small interface (Backend).

Only this package imports a framework, and only the backend that a cell asks for, so a
PyTorch cell never pays TensorFlow's import and `import dlbench` stays light.
"""

import importlib
from collections.abc import Callable
from typing import Any, Protocol

import numpy as np

from dlbench.axes import FRAMEWORKS
from dlbench.models import ModelSpec

Step = Callable[[], Any]


class Backend(Protocol):
    """What a scenario needs from a framework; see pytorch.py and tensorflow.py."""

    name: str
    recipes: dict[str, Callable[[Any, dict], Step]]

    def device_problem(self) -> str | None:
        """Why the requested device cannot be used, or None."""

    def thread_settings(self) -> dict[str, int]:
        """The intra-op and inter-op thread counts the framework really uses."""

    def build(self, spec: ModelSpec, seed: int) -> Any:
        """The model with random weights, on the device, ready for inference."""

    def inputs(self, token_ids: np.ndarray) -> dict:
        """Model inputs on the device from host token ids."""

    def synchronize(self) -> None:
        """Wait for queued device work, so that it falls inside a measurement."""

    def is_out_of_memory(self, exc: BaseException) -> bool: ...

    def versions(self) -> dict[str, str]: ...


def load_backend(framework: str, device: str, threads: int, interop_threads: int) -> Backend:
    """Import the framework's backend module (and so the framework) and configure it."""
    if framework not in FRAMEWORKS:
        raise ValueError(f"unknown framework {framework!r}; known: {', '.join(FRAMEWORKS)}")
    module = importlib.import_module(f"dlbench.frameworks.{framework}")
    return module.make_backend(device=device, threads=threads, interop_threads=interop_threads)
