"""Sampling a measuring process from outside it: memory, CPU and the machine's load.

The supervisor calls `sample()` between its blocking waits on the child, so nothing of
this runs inside the measured process (no thread there, no GIL taken from the cell). On a
machine with as many cores as the cell has threads, every wake-up of the supervisor takes
a core from the cell for a moment, so a sample is kept small: the resident memory (100 Hz)
is one pread of /proc/<pid>/statm on a file kept open; the CPU time and the machine's
counters (busy, stolen), which only need the ends of the timed loop and ~100 ms spans,
come with every `load_every`-th sample.
"""

import os
import time
from dataclasses import dataclass, field

_TICK = os.sysconf("SC_CLK_TCK")
_PAGE_MB = os.sysconf("SC_PAGE_SIZE") / 2**20


def _system_counters(fd: int) -> tuple[int, int, int]:
    """(busy, steal, total) jiffies of the whole machine since boot, from /proc/stat."""
    fields = [int(v) for v in os.pread(fd, 256, 0).split(b"\n", 1)[0].split()[1:9]]
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
    load_every: int = 10
    memory: list[tuple[float, float]] = field(default_factory=list)  # (time, rss_mb)
    samples: list[Sample] = field(default_factory=list)  # with CPU and machine counters

    def __post_init__(self):
        self._fds = {}
        try:
            for name, path in (("statm", f"/proc/{self.pid}/statm"),
                               ("stat", f"/proc/{self.pid}/stat"), ("system", "/proc/stat")):
                self._fds[name] = os.open(path, os.O_RDONLY)
        except OSError:
            self.close()  # the process has ended already: no samples

    def sample(self) -> None:
        if not self._fds:
            return
        try:
            rss_mb = int(os.pread(self._fds["statm"], 128, 0).split()[1]) * _PAGE_MB
            now = time.time()
            self.memory.append((now, rss_mb))
            if (len(self.memory) - 1) % self.load_every:  # the counters: every n-th sample
                return
            stat = os.pread(self._fds["stat"], 1024, 0).rsplit(b")", 1)[1].split()
            cpu_s = (int(stat[11]) + int(stat[12])) / _TICK
            self.samples.append(Sample(now, rss_mb, cpu_s,
                                       *_system_counters(self._fds["system"])))
        except (OSError, IndexError, ValueError):
            pass  # the process has just ended

    def rss_mb(self) -> float | None:
        """The latest resident memory sampled."""
        return self.memory[-1][1] if self.memory else None

    def peak_rss_mb(self, start: float, end: float) -> float | None:
        """The highest resident memory sampled between two wall-clock times (a cell)."""
        return max((rss for t, rss in self.memory if start <= t <= end), default=None)

    def window(self, start: float, end: float) -> dict | None:
        """Utilization between two wall-clock times (the timed loop), or None if unsampled."""
        inside = [s for s in self.samples if start <= s.time <= end]
        memory = [t for t, _ in self.memory if start <= t <= end]
        if len(inside) < 2:
            return None
        first, last = inside[0], inside[-1]
        seconds = last.time - first.time
        total = max(last.total - first.total, 1)
        busy_cores = (last.busy - first.busy) / total * (os.cpu_count() or 1)
        process_cores = (last.cpu_s - first.cpu_s) / seconds if seconds > 0 else 0.0
        memory_s = memory[-1] - memory[0]
        return {
            "samples": len(memory),
            "sample_hz": round((len(memory) - 1) / memory_s, 1) if memory_s > 0 else None,
            "process_cpu_cores_mean": round(process_cores, 3),
            "process_cpu_cores_max": round(_max_rate(inside), 3),
            "system_cpu_busy_fraction": round((last.busy - first.busy) / total, 4),
            "other_load_cores": round(max(busy_cores - process_cores, 0.0), 3),
            "steal_fraction": round((last.steal - first.steal) / total, 4),
        }

    def close(self) -> None:
        for fd in self._fds.values():
            os.close(fd)
        self._fds = {}


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
