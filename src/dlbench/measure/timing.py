"""Timing: host time of a step with its synchronization, device time where the framework
has device events, and when the timed loop stops (fixed, or once the median is known
well enough: adaptive stopping)."""

import bisect
import math
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from dlbench.measure import faults, turns
from dlbench.measure.sampler import NOISY_STEAL_FRACTION, machine_counters
from dlbench.measure.stats import median_ranks

if TYPE_CHECKING:
    from dlbench.measure.memory import PhaseMemory

# Adaptive stopping checks the interval of the median at most this often (seconds), so
# that short steps are not slowed by the check between them.
CHECK_EVERY_S = 0.05


class DeviceTimer(Protocol):
    """Events on the device's stream around a step (CUDA events on a GPU)."""

    method: str

    def start(self) -> None: ...

    def stop(self) -> None: ...

    def elapsed_ms(self) -> float:
        """Device time between start and stop; valid once the device is synchronized."""


@dataclass(frozen=True)
class Stopping:
    """When the timed loop ends: at least `min_iterations` and `min_duration_s`; then, with
    a `target_ci` (a fraction, 0 = off), once the 95% interval of the median is within
    ±target_ci of it, or at `max_duration_s` whatever it reached."""

    min_duration_s: float
    min_iterations: int
    target_ci: float = 0.0
    max_duration_s: float = math.inf

    @classmethod
    def from_settings(cls, settings: dict) -> "Stopping":
        target = settings.get("target_ci") or 0.0
        return cls(settings["min_duration_s"], settings["min_iterations"], target,
                   settings.get("max_duration_s", math.inf) if target else math.inf)


@dataclass
class Loop:
    """The timed loop's per-iteration host times (ms), the device times if timed, why it
    stopped, the output of its last iteration, and, measured side by side, its slices:
    (Unix time of the start, seconds, iterations, the share the host stole), the other
    recipes' turns between them, and those dropped for the host's stealing."""

    host: list[float]
    device: list[float] | None
    stopped_by: str
    output: object = field(default=None, repr=False)
    slices: list[tuple[float, float, int, float]] | None = None
    stolen: list[tuple[float, float, int, float]] | None = None  # slices dropped (`Slices`)


def time_call(call: Callable[[], object]) -> float:
    """Seconds one call takes."""
    start = time.perf_counter()
    call()
    return time.perf_counter() - start


def time_batch(call: Callable[[], object], synchronize: Callable[[], None],
               count: int) -> float:
    """Seconds `count` calls take, with one synchronization after them all (the queued
    device work of the batch included)."""
    start = time.perf_counter()
    for _ in range(count):
        call()
    synchronize()
    return time.perf_counter() - start


def within_target(sorted_ms: list[float], target: float) -> bool:
    """Whether the 95% interval of the median of these sorted samples is within ±target of
    the median (never below 6 samples: fewer cannot give a 95% interval at all)."""
    n = len(sorted_ms)
    low, high, coverage = median_ranks(n)
    if coverage < 0.95:
        return False
    middle = n // 2
    median = sorted_ms[middle] if n % 2 else (sorted_ms[middle - 1] + sorted_ms[middle]) / 2
    return median > 0 and max(median - sorted_ms[low], sorted_ms[high] - median) <= (
        target * median)


def timed_loop(step: Callable[[], object], synchronize: Callable[[], None], stopping: Stopping,
               device_timer: DeviceTimer | None = None) -> Loop:
    """Per-iteration host times (each step waits for its queued device work), and the
    device times if a timer is given, until `stopping` says so. Measured side by side
    (dlbench.measure.turns), the loop hands the CPU on after each slice and goes on at its
    next turn: the stopping rule counts the loop's own time, not the turns between; a
    slice in which the host stole CPU time is timed again (`Slices`)."""
    host: list[float] = []
    device: list[float] | None = None if device_timer is None else []
    ordered: list[float] = []  # the samples sorted, for the adaptive check
    baton = turns.current()
    slices = None if baton is None else Slices()
    planted = faults.planted_delay_s()  # 0 but in a test of a slower side
    clock = time.perf_counter
    if slices is not None:
        slices.begin(0)
    start = last_check = clock()
    before = 0.0  # the loop's own seconds in its earlier slices (those kept)

    def next_slice() -> None:
        nonlocal start
        baton.wait(timed=True)
        slices.begin(len(host))
        start = clock()

    while True:
        t0 = clock()
        if device_timer is None:
            output = step()
            synchronize()
        else:
            device_timer.start()
            output = step()
            device_timer.stop()
            synchronize()
        if planted:
            done = clock()
            while clock() - done < planted:
                pass
        host.append((clock() - t0) * 1e3)
        if device is not None:
            device.append(device_timer.elapsed_ms())
        own = clock() - start  # this slice's (the whole loop's, unless side by side)
        stopped_by = _stop(host, ordered, stopping, before + own, clock() - last_check)
        if stopped_by == "checked":
            last_check = clock()
            stopped_by = None
        ended = slices is not None and (stopped_by or own >= baton.slice_s)
        if ended and not slices.end(own, host, device, ordered):
            stopped_by = None  # stolen: its iterations are gone, timed again at a later turn
        elif ended:
            before += own
        if stopped_by:
            return Loop(host, device, stopped_by, output,
                        None if slices is None else slices.kept,
                        None if slices is None else slices.stolen)
        del output  # never two outputs alive at once: the peak is one step's
        if ended:
            next_slice()


class Slices:
    """A loop's slices measured side by side: (Unix time of the start, seconds,
    iterations, the share of the machine's CPU time the host stole) of those kept and of
    those dropped. A slice in which the host stole more than a noisy machine's limit
    (NOISY_STEAL_FRACTION) is dropped and its iterations timed again at a later turn, at
    most RETIMED a loop: a burst of steal costs the cell half a second beside the other
    recipes, where the noisy-machine flag would have it measured again in a fresh process
    (retry_noisy) after every other recipe had finished. After RETIMED, stolen slices are
    kept, and the share stolen over the kept slices flags the cell as before. A slice of
    fewer than JUDGED_JIFFIES of the machine's CPU time (its last, cut short) is kept
    whatever it read: one tick of steal in a few is no measure of the host."""

    RETIMED = 3
    JUDGED_JIFFIES = 20  # 0.1 s of 2 CPUs

    def __init__(self):
        self.kept: list[tuple[float, float, int, float]] = []
        self.stolen: list[tuple[float, float, int, float]] = []

    def begin(self, first: int) -> None:
        self.first, self.began, self.counters = first, time.time(), machine_counters()

    def end(self, seconds: float, host: list[float], device: list[float] | None,
            ordered: list[float]) -> bool:
        """Close the slice begun last; whether it is kept (else its samples are removed)."""
        _, steal, total = (now - then for now, then in zip(machine_counters(), self.counters,
                                                           strict=True))
        planted = faults.planted_steal(len(self.kept) + len(self.stolen))
        share = max(steal / max(total, 1), planted)
        judged = share if total >= self.JUDGED_JIFFIES else planted
        count = len(host) - self.first
        entry = (self.began, seconds, count, round(share, 4))
        if judged <= NOISY_STEAL_FRACTION or len(self.stolen) >= self.RETIMED:
            self.kept.append(entry)
            return True
        self.stolen.append(entry)
        del host[self.first:]
        if device is not None:
            del device[self.first:]
        if ordered:
            ordered[:] = sorted(host)
        return False


def _stop(host: list[float], ordered: list[float], stopping: Stopping, elapsed: float,
          since_check: float) -> str | None:
    """Why the loop stops after this iteration; "checked" when the adaptive check ran and
    the loop goes on; None when it goes on unchecked."""
    if stopping.target_ci:
        bisect.insort(ordered, host[-1])
    if len(host) < stopping.min_iterations or elapsed < stopping.min_duration_s:
        return None
    if not stopping.target_ci:
        return "min_duration_and_iterations"
    if elapsed >= stopping.max_duration_s:
        return "max_duration"
    first = len(host) == stopping.min_iterations
    if not first and since_check < CHECK_EVERY_S:
        return None
    return "target_ci" if within_target(ordered, stopping.target_ci) else "checked"


def steady_state(step: Callable[[], object], synchronize: Callable[[], None], settings: dict,
                 clock: "PhaseClock", device_timer: DeviceTimer | None = None,
                 min_warmup: int = 0) -> dict:
    """The timing section of a step (see steady_state_and_output)."""
    return steady_state_and_output(step, synchronize, settings, clock, device_timer,
                                   min_warmup)[0]


def steady_state_and_output(step: Callable[[], object], synchronize: Callable[[], None],
                            settings: dict, clock: "PhaseClock",
                            device_timer: DeviceTimer | None = None,
                            min_warmup: int = 0) -> tuple[dict, object]:
    """The timing section of a step and the output of its last timed call: its first call
    on its own (compilation lands there, never in the loop), the warm-up (at least
    `min_warmup` calls, e.g. where a recipe records a CUDA graph on its second call), then
    the timed loop (settings: warmup_iterations, min_duration_s, min_iterations, target_ci,
    max_duration_s). Marks the first timed iteration on the clock, and the memory phases on
    its `memory`, if it has one."""
    from dlbench.measure.stats import summarize

    def call() -> None:
        step()
        synchronize()

    memory = getattr(clock, "memory", None)
    if memory:
        memory.begin()
    cold_start_s = time_call(call)
    if memory:
        memory.end("first_call")
    warmup = max(settings["warmup_iterations"], min_warmup)
    warmup_ms = [time_call(call) * 1e3 for _ in range(warmup)]
    if memory:
        memory.begin()
    clock.mark("first_timed_iteration_s")
    baton = turns.current()
    if baton is not None:  # side by side: the first slice at this process's turn
        baton.wait(timed=True)
    stopping = Stopping.from_settings(settings)
    loop = timed_loop(step, synchronize, stopping, device_timer)
    clock.mark("timed_loop_end_s")
    if memory:
        memory.end("steady")
    samples, device = loop.host, loop.device
    timing = {"cold_start_s": cold_start_s, "warmup_iterations": warmup,
              "warmup_ms": warmup_ms, "iterations": len(samples),
              "loop_s": sum(samples) / 1e3, "stopped_by": loop.stopped_by,
              "samples_ms": samples, **summarize(samples)}
    if stopping.target_ci:
        timing["target_ci"] = stopping.target_ci
    if loop.slices is not None:
        timing["slices"] = _slices(loop)
        timing["stolen_slices"] = [_slice(*entry) for entry in loop.stolen]
    if device:  # on a GPU: the same iterations timed on the device, by its events
        timing["device_time"] = {"method": device_timer.method, "samples_ms": device,
                                 **summarize(device)}
    return timing, loop.output


def _slices(loop: Loop) -> list[dict]:
    """The slices of a loop measured side by side, each with the median of its iterations
    (a ratio between recipes pairs slices seconds apart)."""
    found, first = [], 0
    for entry in loop.slices:
        count = entry[2]
        found.append({**_slice(*entry),
                      "median_ms": statistics.median(loop.host[first:first + count])})
        first += count
    return found


def _slice(began: float, seconds: float, count: int, share: float) -> dict:
    """A slice as its record gives it (`Slices`' entries)."""
    return {"started_at": round(began, 4), "seconds": round(seconds, 4), "iterations": count,
            "steal_fraction": share}


class PhaseClock:
    """Seconds since the process started, marked at the phases of a cell; `on_mark` is
    told of each phase as it is reached (the supervisor's profiler watches for them); and,
    where the measuring process keeps them, the memory peaks of those phases."""

    def __init__(self, process_start: float, on_mark: Callable[[str], None] | None = None,
                 memory: "PhaseMemory | None" = None):
        self.process_start = process_start
        self.marks: dict[str, float] = {}
        self.on_mark = on_mark
        self.memory = memory

    def mark(self, phase: str) -> None:
        self.marks[phase] = round(time.time() - self.process_start, 4)
        if self.on_mark:
            self.on_mark(phase)
