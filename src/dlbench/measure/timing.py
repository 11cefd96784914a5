"""Timing: host time of a step with its synchronization, and device time where the
framework has device events."""

import time
from collections.abc import Callable
from typing import Protocol


class DeviceTimer(Protocol):
    """Events on the device's stream around a step (CUDA events on a GPU)."""

    method: str

    def start(self) -> None: ...

    def stop(self) -> None: ...

    def elapsed_ms(self) -> float:
        """Device time between start and stop; valid once the device is synchronized."""


def time_call(call: Callable[[], object]) -> float:
    """Seconds one call takes."""
    start = time.perf_counter()
    call()
    return time.perf_counter() - start


def timed_loop(
    step: Callable[[], object], synchronize: Callable[[], None], min_duration_s: float,
    min_iterations: int, device_timer: DeviceTimer | None = None,
) -> tuple[list[float], list[float] | None]:
    """Per-iteration host times in ms (each step waits for its queued device work), and the
    device times if a timer is given, until both the minimum duration and count are
    reached."""
    host: list[float] = []
    device: list[float] | None = None if device_timer is None else []
    clock = time.perf_counter
    start = clock()
    while len(host) < min_iterations or clock() - start < min_duration_s:
        t0 = clock()
        if device_timer is None:
            step()
            synchronize()
        else:
            device_timer.start()
            step()
            device_timer.stop()
            synchronize()
        host.append((clock() - t0) * 1e3)
        if device is not None:
            device.append(device_timer.elapsed_ms())
    return host, device


def steady_state(step: Callable[[], object], synchronize: Callable[[], None], settings: dict,
                 clock: "PhaseClock", device_timer: DeviceTimer | None = None) -> dict:
    """The timing section of a step: its first call on its own (compilation lands there,
    never in the loop), the warm-up, then the timed loop (settings: warmup_iterations,
    min_duration_s, min_iterations). Marks the first timed iteration on the clock."""
    from dlbench.measure.stats import summarize

    def call() -> None:
        step()
        synchronize()

    cold_start_s = time_call(call)
    for _ in range(settings["warmup_iterations"]):
        call()
    clock.mark("first_timed_iteration_s")
    samples, device = timed_loop(step, synchronize, settings["min_duration_s"],
                                 settings["min_iterations"], device_timer)
    clock.mark("timed_loop_end_s")
    timing = {"cold_start_s": cold_start_s, "warmup_iterations": settings["warmup_iterations"],
              "iterations": len(samples), "loop_s": sum(samples) / 1e3, "samples_ms": samples,
              **summarize(samples)}
    if device:  # on a GPU: the same iterations timed on the device, by its events
        timing["device_time"] = {"method": device_timer.method, "samples_ms": device,
                                 **summarize(device)}
    return timing


class PhaseClock:
    """Seconds since the process started, marked at the phases of a cell; `on_mark` is
    told of each phase as it is reached (the supervisor's profiler watches for them)."""

    def __init__(self, process_start: float, on_mark: Callable[[str], None] | None = None):
        self.process_start = process_start
        self.marks: dict[str, float] = {}
        self.on_mark = on_mark

    def mark(self, phase: str) -> None:
        self.marks[phase] = round(time.time() - self.process_start, 4)
        if self.on_mark:
            self.on_mark(phase)
