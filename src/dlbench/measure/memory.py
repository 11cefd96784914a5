"""Peak host memory of this process, per cell rather than per process lifetime.

Linux keeps the peak resident set (VmHWM); writing 5 to /proc/self/clear_refs resets it,
so the peak read at the end covers exactly the phases after the reset.
"""

import resource
from pathlib import Path

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
