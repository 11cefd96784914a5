"""Peak host memory of this process, per cell and per phase of a cell rather than per
process lifetime.

Linux keeps the peak resident set (VmHWM); writing 5 to /proc/self/clear_refs resets it,
so the peak read at the end of a phase covers exactly that phase. A cell's phases: loading
(from the cell's start until the model is ready: building, loading weights, tracing), the
first call (compilation), the warm-up, and the timed loop (the steady state). On a GPU the
framework's allocator gives the same phases (its peak, reset at each boundary).
"""

import resource
from pathlib import Path
from typing import Protocol

_STATUS = Path("/proc/self/status")
_CLEAR_REFS = Path("/proc/self/clear_refs")


def reset_peak() -> bool:
    """Reset the kernel's peak-RSS counter; False where the kernel does not allow it."""
    try:
        _CLEAR_REFS.write_text("5")
        return True
    except OSError:
        return False


def _status_mb(field: str) -> float | None:
    """A memory field of /proc/self/status (e.g. VmHWM) in MiB, or None."""
    try:
        for line in _STATUS.read_text().splitlines():
            if line.startswith(f"{field}:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return None


def peak_rss_mb() -> float:
    """Peak resident set size in MiB since the last reset (or process start)."""
    peak = _status_mb("VmHWM")
    return peak if peak is not None else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def rss_mb() -> float:
    """Resident memory now (in a group: what the earlier cells left behind)."""
    return _status_mb("VmRSS") or 0.0


class DevicePeaks(Protocol):
    """The framework's device-memory counters (a backend on a GPU)."""

    def device_allocated_mb(self) -> float:
        """Device memory the framework has allocated now."""

    def device_peaks_mb(self) -> dict[str, float]:
        """The framework's peaks since their last reset: `allocated`, and `reserved` where
        its allocator caches."""

    def reset_device_peaks(self) -> None: ...


class PhaseMemory:
    """The host memory of a cell by phase, and on a GPU the device memory likewise.

    Created when the cell starts (which resets the kernel's peak counter): `end(phase)`
    records the peak since the last boundary and starts the next phase, `begin()` starts a
    phase without recording the one before, `resident(name)` records the memory now.
    `values()` gives `<phase>_peak_mb` and `resident_<name>_mb` (device ones prefixed with
    `device_`), and `cell_peak_mb()` the peak over the whole cell.
    """

    def __init__(self, device: DevicePeaks | None = None):
        self.resettable = reset_peak()
        self.method = ("VmHWM after clear_refs" if self.resettable
                       else "ru_maxrss (process lifetime)")
        self._device = device
        self._values: dict[str, float] = {}
        self._peak = 0.0  # the cell's peak over the phases closed so far
        self._device_peaks: dict[str, float] = {}

    def set_device(self, device: DevicePeaks | None) -> None:
        """The device counters, once the framework is loaded (None on the CPU)."""
        self._device = device
        if device is not None:
            device.reset_device_peaks()

    def begin(self) -> None:
        """Start a phase here (what came since the last boundary is not recorded)."""
        self._close()

    def end(self, phase: str) -> None:
        """Record the peak of the phase that ends now, and start the next one."""
        host, device = self._close()
        if self.resettable:  # else the counter holds the process's lifetime peak
            self._values[f"{phase}_peak_mb"] = host
        if device is not None:
            self._values[f"device_{phase}_peak_mb"] = device

    def resident(self, name: str) -> None:
        """Record the memory in use now, e.g. `after_model` when the model is ready."""
        self._values[f"resident_{name}_mb"] = rss_mb()
        if self._device is not None:
            self._values[f"device_resident_{name}_mb"] = self._device.device_allocated_mb()

    def _close(self) -> tuple[float, float | None]:
        host = peak_rss_mb()
        self._peak = max(self._peak, host)
        reset_peak()
        if self._device is None:
            return host, None
        peaks = self._device.device_peaks_mb()
        for key, value in peaks.items():
            self._device_peaks[key] = max(self._device_peaks.get(key, 0.0), value)
        self._device.reset_device_peaks()
        return host, peaks["allocated"]

    def cell_peak_mb(self) -> float:
        """The host peak over the whole cell: every phase, and what came after the last."""
        return max(self._peak, peak_rss_mb())

    def device_cell_peaks_mb(self) -> dict[str, float]:
        """The framework's device peaks over the whole cell (empty on the CPU)."""
        if self._device is None:
            return {}
        now = self._device.device_peaks_mb()
        return {key: max(value, self._device_peaks.get(key, 0.0)) for key, value in now.items()}

    def values(self) -> dict[str, float]:
        return dict(self._values)
