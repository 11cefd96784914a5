"""Sampling a measuring process tree from outside it: memory, CPU and the machine's load.

The supervisor calls `sample()` between its blocking waits on the child, so nothing of
this runs inside the measured process (no thread there, no GIL taken from the cell). On a
machine with as many cores as the cell has threads, every wake-up of the supervisor takes
a core from the cell for a moment, so a sample is kept small: the resident memory (100 Hz)
is one pread of /proc/<pid>/statm per process of the tree, on files kept open; the CPU time
and the machine's counters (busy, stolen), which only need the ends of the timed loop and
~100 ms spans, come with every `load_every`-th sample. The tree (the child and its
descendants: input-pipeline workers, compile workers) is looked up by `refresh_tree()`,
which the supervisor calls once a second: finding descendants scans every process.
"""

import os
import time
from dataclasses import dataclass, field

import psutil

# A cell measured while the host stole more of the machine's CPU time is flagged *noisy
# machine* (dlbench.measure.flags); a slice timed side by side, timed again
# (dlbench.measure.timing.Slices).
NOISY_STEAL_FRACTION = 0.05
_TICK = os.sysconf("SC_CLK_TCK")
_PAGE_MB = os.sysconf("SC_PAGE_SIZE") / 2**20


def _system_counters(fd: int) -> tuple[int, int, int]:
    """(busy, steal, total) jiffies of the whole machine since boot, from /proc/stat."""
    fields = [int(v) for v in os.pread(fd, 256, 0).split(b"\n", 1)[0].split()[1:9]]
    user, nice, system, idle, iowait, irq, softirq, steal = fields
    busy = user + nice + system + irq + softirq
    return busy, steal, busy + idle + iowait + steal


def machine_counters() -> tuple[int, int, int]:
    """(busy, steal, total) jiffies of the whole machine since boot, read now."""
    fd = os.open("/proc/stat", os.O_RDONLY)
    try:
        return _system_counters(fd)
    finally:
        os.close(fd)


@dataclass
class Sample:
    time: float  # wall clock (time.time), to line up with the child's phase marks
    rss_mb: float
    cpu_s: float  # CPU time the process tree has used (user + system)
    busy: int
    steal: int
    total: int
    main_cpu_s: float = 0.0  # of it, the measured process itself (not its workers)
    read_bytes: int = 0  # bytes the tree's processes had read from storage
    processes: int = 1
    sampler_cpu_s: float = 0.0  # CPU time of the sampling process itself (the supervisor)


@dataclass
class _Proc:
    """The kept-open /proc files of one process of the tree."""

    statm: int
    stat: int
    io: int | None  # /proc/<pid>/io, where readable

    def close(self) -> None:
        for fd in (self.statm, self.stat, self.io):
            if fd is not None:
                os.close(fd)


@dataclass
class ProcessSampler:
    pid: int
    load_every: int = 10
    memory: list[tuple[float, float]] = field(default_factory=list)  # (time, tree rss_mb)
    samples: list[Sample] = field(default_factory=list)  # with CPU and machine counters

    def __post_init__(self):
        self._procs: dict[int, _Proc] = {}
        try:
            self._system = os.open("/proc/stat", os.O_RDONLY)
        except OSError:
            self._system = None
        self._open(self.pid)

    def _open(self, pid: int) -> None:
        try:
            statm = os.open(f"/proc/{pid}/statm", os.O_RDONLY)
        except OSError:
            return  # ended already
        try:
            stat = os.open(f"/proc/{pid}/stat", os.O_RDONLY)
        except OSError:
            os.close(statm)
            return
        try:
            io = os.open(f"/proc/{pid}/io", os.O_RDONLY)
        except OSError:
            io = None  # another user's process, or no I/O accounting
        self._procs[pid] = _Proc(statm, stat, io)

    def refresh_tree(self) -> None:
        """Follow the tree: open the processes started since, close those that ended."""
        try:
            pids = {self.pid, *(p.pid for p in psutil.Process(self.pid).children(recursive=True))}
        except psutil.Error:
            pids = set()
        for pid in set(self._procs) - pids:
            self._procs.pop(pid).close()
        for pid in pids - set(self._procs):
            self._open(pid)

    @property
    def pids(self) -> set[int]:
        """The processes of the tree, as last looked up."""
        return set(self._procs)

    def tree_rss_mb(self) -> float:
        """The resident memory of the tree now."""
        total = 0
        for proc in list(self._procs.values()):
            try:
                total += int(os.pread(proc.statm, 128, 0).split()[1])
            except (OSError, IndexError, ValueError):
                pass  # the process has just ended
        return total * _PAGE_MB

    def _tree_counters(self) -> tuple[float, float, int]:
        """CPU time of the tree (user + system; with the children the root has waited for),
        of the root alone, and the bytes the tree's processes read from storage."""
        tree = main = read = 0
        for pid, proc in list(self._procs.items()):
            try:
                fields = os.pread(proc.stat, 1024, 0).rsplit(b")", 1)[1].split()
                own = int(fields[11]) + int(fields[12])
                tree += own
                if pid == self.pid:  # cutime + cstime: ended workers it reaped
                    main = own
                    tree += int(fields[13]) + int(fields[14])
                if proc.io is not None:
                    for line in os.pread(proc.io, 512, 0).splitlines():
                        if line.startswith(b"read_bytes:"):
                            read += int(line.split()[1])
            except (OSError, IndexError, ValueError):
                continue  # the process has just ended
        return tree / _TICK, main / _TICK, read

    def sample(self) -> None:
        if not self._procs:
            return
        now = time.time()
        rss_mb = self.tree_rss_mb()
        self.memory.append((now, rss_mb))
        if (len(self.memory) - 1) % self.load_every or self._system is None:
            return  # the counters: every n-th sample
        try:
            tree, main, read = self._tree_counters()
            own = os.times()
            self.samples.append(Sample(now, rss_mb, tree, *_system_counters(self._system),
                                       main_cpu_s=main, read_bytes=read,
                                       processes=len(self._procs),
                                       sampler_cpu_s=own.user + own.system))
        except (OSError, ValueError):
            pass

    def rss_mb(self) -> float | None:
        """The latest resident memory sampled."""
        return self.memory[-1][1] if self.memory else None

    def peak_rss_mb(self, start: float, end: float) -> float | None:
        """The highest resident memory sampled between two wall-clock times (a cell)."""
        return max((rss for t, rss in self.memory if start <= t <= end), default=None)

    def window(self, start: float, end: float) -> dict | None:
        """Utilization between two wall-clock times (the timed loop), or None if unsampled."""
        return self.windows([(start, end)])

    def windows(self, spans: list[tuple[float, float]]) -> dict | None:
        """Utilization over several spans of wall-clock time, as one window of their
        summed length (a loop timed in slices, the other recipes' turns between them), or
        None if no span was sampled twice."""
        seconds = total = busy = steal = cpu = main = sampler = read = 0
        memory_count, memory_s, processes, sampled, peak = 0, 0.0, 0, 0, 0.0
        for start, end in spans:
            inside = [s for s in self.samples if start <= s.time <= end]
            memory = [t for t, _ in self.memory if start <= t <= end]
            if len(inside) < 2:
                continue
            first, last = inside[0], inside[-1]
            seconds += last.time - first.time
            total += max(last.total - first.total, 0)
            busy += last.busy - first.busy
            steal += last.steal - first.steal
            cpu += last.cpu_s - first.cpu_s
            main += last.main_cpu_s - first.main_cpu_s
            # The sampling's own cost (this process): dlbench's, not another process's load.
            sampler += last.sampler_cpu_s - first.sampler_cpu_s
            read += max(last.read_bytes - first.read_bytes, 0)
            sampled += 1
            memory_count += len(memory)
            memory_s += memory[-1] - memory[0]
            processes = max(processes, *(s.processes for s in inside))
            peak = max(peak, _max_rate(inside))
        if not processes:
            return None
        total = max(total, 1)
        cpus = os.cpu_count() or 1
        busy_cores = busy / total * cpus

        def rate(value: float) -> float:
            return value / seconds if seconds > 0 else 0.0

        return {
            "samples": memory_count,
            "sample_hz": round((memory_count - sampled) / memory_s, 1) if memory_s > 0
            else None,
            "process_cpu_cores_mean": round(rate(cpu), 3),
            "process_cpu_cores_max": round(peak, 3),
            "system_cpu_busy_fraction": round(busy / total, 4),
            "other_load_cores": round(max(busy_cores - rate(cpu) - rate(sampler), 0.0), 3),
            "sampler_cores": round(rate(sampler), 3),
            "steal_fraction": round(steal / total, 4),
            "logical_cpus": cpus,
            # Of the tree's CPU, the measured process itself (its workers: the rest).
            "main_process_cpu_cores_mean": round(rate(main), 3),
            "processes_max": processes,
            "disk_read_mb_per_s": round(rate(read) / 2**20, 3),
        }

    def close(self) -> None:
        for proc in self._procs.values():
            proc.close()
        self._procs = {}
        if self._system is not None:
            os.close(self._system)
            self._system = None


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


# The longest sample period of NVML's utilization (nvmlDeviceGetUtilizationRates).
UTILIZATION_PERIOD_S = 1.0


class GpuSampler:
    """NVML's view of the GPU while a cell runs: utilization, SM clock, and the device
    memory of the measured process tree. Sampled by the supervisor (~10 Hz: NVML calls take
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

    def sample(self, pids: set[int] | None = None) -> None:
        """One sample; pids: the measured tree (default: the measured process alone)."""
        nvml, pids = self._nvml, pids or {self.pid}
        try:
            used = None
            for process in nvml.nvmlDeviceGetComputeRunningProcesses(self._handle):
                if process.pid in pids and process.usedGpuMemory is not None:
                    used = (used or 0) + process.usedGpuMemory / 2**20
            self.samples.append((
                time.time(),
                float(nvml.nvmlDeviceGetUtilizationRates(self._handle).gpu),
                float(nvml.nvmlDeviceGetClockInfo(self._handle, nvml.NVML_CLOCK_SM)),
                used,
            ))
        except nvml.NVMLError:
            pass

    def window(self, start: float, end: float) -> dict | None:
        """Utilization and SM clock between two wall-clock times (a cell's timed loop).

        NVML's utilization is the share of its last sample period (1/6 s to 1 s, by
        product) in which a kernel ran, so a sample counts only once a whole period lies
        inside the window: on an H100 a 0.5-s loop's samples held the idle time before it
        (CUDA graphs replaying back to back read as 62% busy). A window shorter than that
        has no utilization, only the clock, which NVML reads at the instant."""
        inside = [s for s in self.samples if start <= s[0] <= end]
        if not inside:
            return None
        found = {"sm_clock_mhz_mean": round(sum(s[2] for s in inside) / len(inside))}
        settled = [s for s in inside if s[0] - UTILIZATION_PERIOD_S >= start]
        if settled:
            found["gpu_utilization_mean"] = round(sum(s[1] for s in settled) / len(settled), 1)
            found["gpu_utilization_max"] = max(s[1] for s in settled)
        return found

    def memory_peak_mb(self, start: float, end: float) -> float | None:
        """The tree's highest device memory between two wall-clock times (a whole cell:
        in a group, not the peaks of the cells before it)."""
        used = [s[3] for s in self.samples if start <= s[0] <= end and s[3] is not None]
        return max(used) if used else None

    def close(self) -> None:
        try:
            self._nvml.nvmlShutdown()
        except Exception:
            pass
