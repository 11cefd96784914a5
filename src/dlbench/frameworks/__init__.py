"""Framework backends: one package per registered framework (dlbench.catalogue.frameworks).

Each package's `about` declares the framework (light: it imports nothing heavy); its
`backend` is what every scenario needs (the device, thread pools, synchronization, device
timer and memory peaks, out-of-memory detection, versions); its modules named after
scenarios hold that scenario's operations, each implementing the scenario's declared
interface (dlbench.scenarios.<scenario>_ops). Only these packages import a framework, and
only the one a cell asks for, so a PyTorch cell never pays TensorFlow's import and
`import dlbench` stays light. A package's `__init__`, `about` and `recipes` import no
framework.
"""

import importlib
import importlib.util
from functools import cache
from typing import TYPE_CHECKING, Any, Protocol

from dlbench.catalogue.precisions import PRECISIONS

if TYPE_CHECKING:  # for annotations only: this module stays light
    from dlbench.measure.memory import DevicePeaks
    from dlbench.measure.timing import DeviceTimer


class Backend(Protocol):
    """What every scenario needs from a framework."""

    name: str

    def device_problem(self) -> str | None:
        """Why the requested device cannot be used, or None."""

    def precision_problem(self, precision: str) -> str | None:
        """Why the device has no native arithmetic in `precision` (fp32: None)."""

    def set_arithmetic(self, precision: str) -> dict:
        """Set how float32 matrix products are computed for a cell in `precision`: in
        float32 (IEEE), except in `tf32`, where tensor cores may round their inputs to
        TF32. Returns what was set, read back from the framework (`tf32`: allowed or not,
        and the framework's own switches)."""

    def thread_settings(self) -> dict[str, int]:
        """The intra-op and inter-op thread counts the framework really uses."""

    def synchronize(self) -> None:
        """Wait for queued device work, so that it falls inside a measurement."""

    def device_timer(self) -> "DeviceTimer | None":
        """Device events around a step on a GPU (None on the CPU or without events)."""

    def reset_device_memory(self) -> None:
        """Start the framework's device-memory peaks afresh (on a GPU)."""

    def device_memory(self) -> dict[str, float | str] | None:
        """The framework's device-memory peaks since the reset, in MiB (None on the CPU)."""

    def memory_counters(self) -> "DevicePeaks | None":
        """The framework's device-memory counters, for the phases of a cell (None on the
        CPU)."""

    def is_out_of_memory(self, exc: BaseException) -> bool: ...

    def versions(self) -> dict[str, str | None]:
        """The framework's version and its builds on the measured path (CUDA, cuDNN,
        oneDNN), as `<framework>`, `<framework>_cuda`, …"""


def load_backend(framework: str, device: str, threads: int, interop_threads: int) -> Backend:
    """Import the framework's backend (and so the framework) and configure it."""
    from dlbench.catalogue.frameworks import REGISTERED

    if framework not in REGISTERED:
        raise ValueError(f"unknown framework {framework!r}; known: {', '.join(REGISTERED)}")
    module = importlib.import_module(f"dlbench.frameworks.{framework}.backend")
    return module.make_backend(device=device, threads=threads, interop_threads=interop_threads)


def import_ops(framework: str, scenario: str) -> None:
    """Import a scenario's operations module of a framework, if it has one (with what it
    imports, e.g. transformers): part of a process's imports, before any cell is built."""
    name = f"dlbench.frameworks.{framework}.{scenario}"
    if importlib.util.find_spec(name) is not None:
        importlib.import_module(name)


def load_ops(backend: Backend, scenario: str) -> Any:
    """A scenario's operations in the backend's framework (dlbench.frameworks.<fw>.<scenario>):
    they implement the scenario's declared interface (its `ops_interface`, e.g.
    dlbench.scenarios.inference_ops.InferenceOps), which a test checks for every registered
    framework. The scenarios sit above the frameworks, so the caller names the interface:
    `ops: InferenceOps = load_ops(backend, "inference")`."""
    module = importlib.import_module(f"dlbench.frameworks.{backend.name}.{scenario}")
    return module.make_ops(backend)


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
GPU_CAPABILITY = {"bf16": (8, 0), "fp16": (7, 0), "tf32": (8, 0)}


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
    if PRECISIONS[precision].gpu_only:
        return PRECISIONS[precision].gpu_only
    x86, arm = _NATIVE[precision]
    flags = cpu_flags()
    if flags & (x86 | arm):
        return None
    wanted = " or ".join(sorted(x86 | arm))
    return f"this CPU has no native {precision} arithmetic ({wanted}): it would be emulated"
