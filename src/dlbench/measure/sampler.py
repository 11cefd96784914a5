"""Sampling a measuring process from outside it: memory, CPU and the machine's load.

The supervisor calls `sample()` between its blocking waits on the child, so nothing of
this runs inside the measured process (no thread there, no GIL taken from the cell).
Reads are of /proc only: a few tens of microseconds per sample.
"""

import os
import time
from dataclasses import dataclass, field

_TICK = os.sysconf("SC_CLK_TCK")
_PAGE_MB = os.sysconf("SC_PAGE_SIZE") / 2**20


def _system_counters() -> tuple[int, int, int]:
    """(busy, steal, total) jiffies of the whole machine since boot."""
    with open("/proc/stat") as f:
        fields = [int(v) for v in f.readline().split()[1:9]]
    user, nice, system, idle, iowait, irq, softirq, steal = fields
    busy = user + nice + system + irq + softirq
    return busy, steal, busy + idle + iowait + steal


@dataclass
class Sample:
    time: float  # wall clock (time.time), to line up with the child's phase marks
    rss_mb: float
    cpu_s: float  # CPU time the process has used (user + system)
    busy: int
    steal: int
    total: int


@dataclass
class ProcessSampler:
    pid: int
    samples: list[Sample] = field(default_factory=list)

    def sample(self) -> Sample | None:
        try:
            with open(f"/proc/{self.pid}/statm") as f:
                rss_mb = int(f.read().split()[1]) * _PAGE_MB
            with open(f"/proc/{self.pid}/stat") as f:
                stat = f.read().rsplit(")", 1)[1].split()
            cpu_s = (int(stat[11]) + int(stat[12])) / _TICK
        except (OSError, IndexError, ValueError):
            return None  # the process has just ended
        latest = Sample(time.time(), rss_mb, cpu_s, *_system_counters())
        self.samples.append(latest)
        return latest

    def peak_rss_mb(self) -> float | None:
        return max((s.rss_mb for s in self.samples), default=None)

    def window(self, start: float, end: float) -> dict | None:
        """Utilization between two wall-clock times (the timed loop), or None if unsampled."""
        inside = [s for s in self.samples if start <= s.time <= end]
        if len(inside) < 2:
            return None
        first, last = inside[0], inside[-1]
        seconds = last.time - first.time
        total = max(last.total - first.total, 1)
        busy_cores = (last.busy - first.busy) / total * (os.cpu_count() or 1)
        process_cores = (last.cpu_s - first.cpu_s) / seconds if seconds > 0 else 0.0
        return {
            "samples": len(inside),
            "sample_hz": round((len(inside) - 1) / seconds, 1) if seconds > 0 else None,
            "process_cpu_cores_mean": round(process_cores, 3),
            "process_cpu_cores_max": round(_max_rate(inside), 3),
            "system_cpu_busy_fraction": round((last.busy - first.busy) / total, 4),
            "other_load_cores": round(max(busy_cores - process_cores, 0.0), 3),
            "steal_fraction": round((last.steal - first.steal) / total, 4),
        }


def _max_rate(samples: list[Sample], span_s: float = 0.1) -> float:
    """The highest CPU use (cores) over ~100 ms stretches (CPU time has 10 ms ticks)."""
    best, j = 0.0, 0
    for i, s in enumerate(samples):
        while j < i and s.time - samples[j].time > span_s:
            j += 1
        if j > 0 and s.time - samples[j - 1].time >= span_s:
            dt = s.time - samples[j - 1].time
            best = max(best, (s.cpu_s - samples[j - 1].cpu_s) / dt)
    return best


class GpuSampler:
    """NVML's view of the GPU while a cell runs: utilization, SM clock, and the device
    memory of the measured process. Sampled by the supervisor (~10 Hz: NVML calls take
    about a millisecond); absent without an NVIDIA driver."""

    def __init__(self, pid: int, index: int = 0):
        import pynvml

        self._nvml, self.pid = pynvml, pid
        pynvml.nvmlInit()
        self._handle = pynvml.nvmlDeviceGetHandleByIndex(index)
        self.samples: list[tuple[float, float, float, float | None]] = []

    @classmethod
    def open(cls, pid: int) -> "GpuSampler | None":
        visible = os.environ.get("CUDA_VISIBLE_DEVICES", "0").split(",")[0].strip()
        try:
            return cls(pid, int(visible) if visible.isdigit() else 0)
        except Exception:  # no driver, no device, or an index NVML does not know
            return None

    def sample(self) -> None:
        nvml = self._nvml
        try:
            used = None
            for process in nvml.nvmlDeviceGetComputeRunningProcesses(self._handle):
                if process.pid == self.pid and process.usedGpuMemory is not None:
                    used = process.usedGpuMemory / 2**20
            self.samples.append((
                time.time(),
                float(nvml.nvmlDeviceGetUtilizationRates(self._handle).gpu),
                float(nvml.nvmlDeviceGetClockInfo(self._handle, nvml.NVML_CLOCK_SM)),
                used,
            ))
        except nvml.NVMLError:
            pass

    def window(self, start: float, end: float) -> dict | None:
        inside = [s for s in self.samples if start <= s[0] <= end]
        if not inside:
            return None
        used = [s[3] for s in self.samples if s[3] is not None]
        return {
            "gpu_utilization_mean": round(sum(s[1] for s in inside) / len(inside), 1),
            "gpu_utilization_max": max(s[1] for s in inside),
            "sm_clock_mhz_mean": round(sum(s[2] for s in inside) / len(inside)),
            "gpu_process_memory_peak_mb": max(used) if used else None,
        }

    def close(self) -> None:
        try:
            self._nvml.nvmlShutdown()
        except Exception:
            pass
