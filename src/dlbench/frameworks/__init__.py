"""Framework backends, one module each, behind one small interface (Backend).

Only this package imports a framework, and only the backend that a cell asks for, so a
PyTorch cell never pays TensorFlow's import and `import dlbench` stays light.
"""

import importlib
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from dlbench.axes import FRAMEWORKS
from dlbench.measure.timing import DeviceTimer
from dlbench.models import ModelSpec
from dlbench.optimizations import Optimization

Step = Callable[[], Any]
Recipe = Callable[[Any, dict, Optimization], Step]


class Backend(Protocol):
    """What a scenario needs from a framework; see pytorch.py and tensorflow.py."""

    name: str
    # Base recipe name → (model, inputs, optimization) → the step to time. Each recipe
    # applies the optimization's precision itself (or `build` does, for TensorFlow).
    recipes: dict[str, Recipe]

    def device_problem(self) -> str | None:
        """Why the requested device cannot be used, or None."""

    def optimization_problem(self, optimization: Optimization) -> str | None:
        """Why the device cannot run this optimization (e.g. no native bf16), or None."""

    def thread_settings(self) -> dict[str, int]:
        """The intra-op and inter-op thread counts the framework really uses."""

    def build(self, spec: ModelSpec, seed: int, optimization: Optimization,
              weights: Path | None = None) -> Any:
        """The model, on the device, ready for inference: the weights from a safetensors
        file written by `dlbench.reference` if given, else random from the seed."""

    def inputs(self, token_ids: np.ndarray) -> dict:
        """Model inputs on the device from host token ids."""

    def synchronize(self) -> None:
        """Wait for queued device work, so that it falls inside a measurement."""

    def device_timer(self) -> DeviceTimer | None:
        """Device events around a step on a GPU (None on the CPU or without events)."""

    def reset_device_memory(self) -> None:
        """Start the framework's device-memory peaks afresh (on a GPU)."""

    def device_memory(self) -> dict[str, float | str] | None:
        """The framework's device-memory peaks since the reset, in MiB (None on the CPU)."""

    def to_numpy(self, output: Any) -> np.ndarray:
        """A step's output as a float32 host array."""

    def release(self) -> None:
        """Free what the cell made outside the process (caches, temporary files)."""

    def is_out_of_memory(self, exc: BaseException) -> bool: ...

    def versions(self) -> dict[str, str]: ...


def load_backend(framework: str, device: str, threads: int, interop_threads: int) -> Backend:
    """Import the framework's backend module (and so the framework) and configure it."""
    if framework not in FRAMEWORKS:
        raise ValueError(f"unknown framework {framework!r}; known: {', '.join(FRAMEWORKS)}")
    module = importlib.import_module(f"dlbench.frameworks.{framework}")
    return module.make_backend(device=device, threads=threads, interop_threads=interop_threads)


def prepare(backend: Backend, model: Any, inputs: dict, optimization: Optimization) -> Step:
    """The step of an optimization: its recipe in its precision (tracing happens here)."""
    recipe = optimization.recipe
    if recipe.perturb is None:
        return backend.recipes[recipe.name](model, inputs, optimization)
    step = backend.recipes["eager"](model, inputs, optimization)
    factor = recipe.perturb
    return lambda: step() * factor


# CPU features that do arithmetic in a reduced precision natively (x86 flags, then ARM's).
_NATIVE = {
    "bf16": ({"avx512_bf16", "amx_bf16"}, {"bf16"}),
    "fp16": ({"avx512_fp16", "amx_fp16"}, {"fphp", "asimdhp"}),
}


@cache
def cpu_flags() -> frozenset[str]:
    """The CPU's feature flags from /proc/cpuinfo (empty where it cannot be read)."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith(("flags", "Features")):
                    return frozenset(line.split(":", 1)[1].split())
    except OSError:
        pass
    return frozenset()


# The first NVIDIA compute capability with tensor cores for each reduced precision.
GPU_CAPABILITY = {"bf16": (8, 0), "fp16": (7, 0)}


def gpu_precision_problem(precision: str, gpu_name: str,
                          capability: tuple[int, int]) -> str | None:
    """Why this GPU has no tensor cores for `precision` (None if it has)."""
    needed = GPU_CAPABILITY[precision]
    if capability >= needed:
        return None
    return (f"{gpu_name} (compute capability {capability[0]}.{capability[1]}) has no "
            f"{precision} tensor cores (needs {needed[0]}.{needed[1]} or newer)")


def cpu_precision_problem(precision: str) -> str | None:
    """Why this CPU has no native arithmetic in `precision` (None if it has, or fp32).

    Without it the frameworks emulate the precision, slower than fp32: not a
    configuration anyone would deploy, so such cells are `unsupported`.
    """
    if precision == "fp32":
        return None
    x86, arm = _NATIVE[precision]
    flags = cpu_flags()
    if flags & (x86 | arm):
        return None
    wanted = " or ".join(sorted(x86 | arm))
    return f"this CPU has no native {precision} arithmetic ({wanted}): it would be emulated"
