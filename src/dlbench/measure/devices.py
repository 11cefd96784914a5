"""Devices: is the requested one there, and exclusive use of it while a cell measures."""

import contextlib
import fcntl
import os
import time
from collections.abc import Iterator
from pathlib import Path

from dlbench.files import scratch


def gpu_problem() -> str | None:
    """Why no NVIDIA GPU can be used here, found without importing a framework (or None)."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None and visible.strip() in ("", "-1"):
        return f"no GPU visible to this job (CUDA_VISIBLE_DEVICES={visible!r})"
    try:
        import pynvml

        pynvml.nvmlInit()
        try:
            count = pynvml.nvmlDeviceGetCount()
        finally:
            pynvml.nvmlShutdown()
    except Exception as exc:  # NVML raises its own error types, or is not installed
        return f"no NVIDIA GPU driver on this host ({type(exc).__name__}: {exc})"
    return None if count else "the NVIDIA driver reports no GPU on this host"


@contextlib.contextmanager
def exclusive(device: str) -> Iterator[float]:
    """Hold the host-wide lock of a device; yields the seconds spent waiting for it.

    Whatever --cores or --jobs allow, no two timing cells of one device overlap on a host.
    flock blocks without spinning and is released by the kernel if the process dies.
    """
    lock_dir = Path(os.environ.get("DLBENCH_LOCK_DIR") or scratch.shared())
    lock_dir.mkdir(parents=True, exist_ok=True)
    with open(lock_dir / f"dlbench-{device}.lock", "a") as handle:
        start = time.perf_counter()
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield time.perf_counter() - start
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
