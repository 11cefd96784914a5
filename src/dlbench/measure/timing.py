"""Host-side timing of a callable that includes its own synchronization."""

import time
from collections.abc import Callable


def time_call(call: Callable[[], object]) -> float:
    """Seconds one call takes."""
    start = time.perf_counter()
    call()
    return time.perf_counter() - start


def timed_loop(
    call: Callable[[], object], min_duration_s: float, min_iterations: int
) -> list[float]:
    """Per-iteration times in ms, until both the minimum duration and count are reached."""
    samples: list[float] = []
    clock = time.perf_counter
    start = clock()
    while len(samples) < min_iterations or clock() - start < min_duration_s:
        t0 = clock()
        call()
        samples.append((clock() - t0) * 1e3)
    return samples


class PhaseClock:
    """Seconds since the process started, marked at the phases of a cell."""

    def __init__(self, process_start: float):
        self.process_start = process_start
        self.marks: dict[str, float] = {}

    def mark(self, phase: str) -> None:
        self.marks[phase] = round(time.time() - self.process_start, 4)
