"""Taking turns: the measuring process's side of measuring several recipes side by side
(dlbench.run.side_by_side). Each recipe's process works only while the job's
coordinator lets it — for all of its work: imports, building, compiling, warm-up, the
correctness check — and times its loop in short slices, handing the CPU back after each
and waiting on a pipe (no CPU) for its next turn. So the recipes' slices alternate
seconds apart and a machine whose pace drifts moves every recipe alike, while nothing
ever runs beside a timed slice.

A process's start-up — its imports and building its first model, work that is not timed
and mostly runs on one core — may run beside other processes' start-ups, one per CPU of
the job (the coordinator's `startups`); everything after it (compiling, warm-up, the
checks) runs alone, so that compile and cold-call times are the process's own.

Outside side-by-side measuring there is no baton (`current()` is None) and nothing here
runs. The messages are one line each: `S` (the process starts up: work that may share the
CPU), `W` (work that is not timed, alone) or `T <position>` (it wants a timed slice of its
cell at that position in the job's order of sizes); the coordinator answers `G` (go) when
it is the process's turn.
"""

import os
import time

# A timed slice: long enough for a few iterations of a step of tens of ms and for the
# sampler's counters (10 Hz) to see it; short enough that the machine's pace barely moves
# within a pair of slices (bench/live_pairs.py, 0.5-s slices, 2026-12-03).
SLICE_S = 0.5

_baton: "Baton | None" = None


class Baton:
    """The measuring process's turns: `wait` for the CPU, telling what it is wanted for."""

    def __init__(self, read_fd: int, write_fd: int, positions: dict[str, int], sides: int,
                 slice_s: float = SLICE_S, startups: int = 1):
        self.read_fd, self.write_fd, self.slice_s = read_fd, write_fd, slice_s
        self.sides = sides  # the recipes taking turns, this one's side included
        self.startups = startups  # how many sides' start-ups may run at once
        self.positions = positions  # of the job's sizes (a cell's `middle`), in its order
        self.position = 0  # that of the cell being measured
        self.waited_s = 0.0  # for its turns, in all
        self.starting = False  # in its start-up, which it may share with other sides'
        self.start_up: dict | None = None  # its start-up's Unix times, once it has ended

    def measuring(self, middle: str) -> None:
        """The cell of these sizes is the one measured now."""
        self.position = self.positions.get(middle, len(self.positions))

    def wait(self, timed: bool = False) -> float:
        """Give up the CPU and wait until it is this process's turn again; the seconds
        waited. A coordinator that is gone (the job ending) lets it go on at once."""
        self.starting = False
        return self._ask(f"T {self.position}\n" if timed else "W\n")

    def started(self) -> float:
        """The start-up is over (the model is built): wait for the CPU to this process
        alone; the seconds waited (0 if it was not starting up)."""
        if not self.starting:
            return 0.0
        self.start_up["ended_at"] = round(time.time(), 4)
        return self.wait()

    def _ask(self, message: str) -> float:
        start = time.perf_counter()
        try:
            os.write(self.write_fd, message.encode())
            os.read(self.read_fd, 1)  # b"G", or b"" when the coordinator is gone
        except OSError:
            pass
        waited = time.perf_counter() - start
        self.waited_s += waited
        return waited


def take(baton: Baton) -> float:
    """Make this process take turns with `baton`: its first wait, before any work (for a
    turn at starting up), in seconds. A turn that the coordinator granted to a process of
    this side that died before it read it is dropped."""
    global _baton
    os.set_blocking(baton.read_fd, False)
    try:
        while os.read(baton.read_fd, 64):
            pass
    except BlockingIOError:
        pass
    os.set_blocking(baton.read_fd, True)
    _baton = baton
    waited = baton._ask("S\n")
    baton.starting, baton.start_up = True, {"began_at": round(time.time(), 4)}
    return waited


def current() -> Baton | None:
    """This process's baton, if it measures side by side."""
    return _baton
