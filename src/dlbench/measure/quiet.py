"""A quiet machine: how many cores other work keeps busy, and waiting until it stops.

A measurement that needs every core it asked for (the GEMM peak) waits, before it starts,
until the rest of the machine is idle: right after a workflow starts, Snakemake, a job
that is ending or the kernel's own work can hold a core for seconds, and a product timed
then is a product of one core. The machine's busy time comes from /proc/stat; this
process's own CPU time is taken out of it, so that what remains is the others' work.
"""

import os
import time
from dataclasses import dataclass

# Other work below this many cores is an idle machine: the kernel, a sampler's wake-ups.
QUIET_CORES = 0.15
WINDOW_S = 0.5  # each look at the machine's load lasts this long


def machine_busy_s() -> float | None:
    """CPU seconds the whole machine has been busy since boot (user, nice, system, irq,
    softirq; the time the host stole is not the machine's work); None where /proc/stat
    cannot be read."""
    try:
        with open("/proc/stat", "rb") as stat:
            user, nice, system, _idle, _iowait, irq, softirq = (
                int(v) for v in stat.readline().split()[1:8])
    except (OSError, ValueError):
        return None
    return (user + nice + system + irq + softirq) / os.sysconf("SC_CLK_TCK")


def own_cpu_s() -> float:
    """CPU seconds this process has used (its threads included)."""
    times = os.times()
    return times.user + times.system


def other_load(seconds: float) -> float | None:
    """Cores that processes other than this one kept busy over the next `seconds` (this
    process sleeps meanwhile); None where /proc/stat cannot be read."""
    busy0, own0, start = machine_busy_s(), own_cpu_s(), time.perf_counter()
    if busy0 is None:
        return None
    time.sleep(seconds)
    busy1, wall = machine_busy_s(), time.perf_counter() - start
    return max(0.0, (busy1 - busy0 - (own_cpu_s() - own0)) / wall)


@dataclass(frozen=True)
class Quiet:
    """What waiting found: whether the machine went quiet, after how long, and the other
    work's cores in the last look."""

    quiet: bool
    waited_s: float
    load_cores: float | None

    def as_dict(self) -> dict:
        return {"quiet": self.quiet, "waited_s": round(self.waited_s, 2),
                "other_load_cores": None if self.load_cores is None
                else round(self.load_cores, 3)}


def wait_until_quiet(max_wait_s: float, threshold: float = QUIET_CORES,
                     window_s: float = WINDOW_S) -> Quiet:
    """Look at the machine in windows of `window_s` until other work keeps fewer than
    `threshold` cores busy, for at most `max_wait_s` (0: one look, no wait)."""
    start = time.perf_counter()
    while True:
        load = other_load(window_s)
        waited = time.perf_counter() - start
        if load is None or load < threshold:
            return Quiet(True, waited, load)
        if waited >= max_wait_s:
            return Quiet(False, waited, load)
