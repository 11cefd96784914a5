"""Measuring several recipes side by side: one job, one group of cells per recipe (the same
sizes of one model), every group's measuring process started at once and taking turns
at the CPU, so that the recipes' timed loops alternate in slices seconds apart
(dlbench.measure.turns) and a ratio between two recipes pairs slices measured under the
same pace of the machine.

Each recipe is a *side*: a process of its own that supervises its group exactly as a job
of one group does (dlbench.run.supervisor: fresh processes, crashes, the time limit, the
memory guard, retry_noisy), its measuring processes holding the baton of the side. This
process, the coordinator, hands out the CPU:
- work that is not timed comes first, so that every side has reached its timed loop
  before any slice is timed: the sides' start-ups (imports, building the model: work on
  one core, mostly) one per CPU of the job at once, everything after them (compiling,
  warm-up, checks) one side at a time;
- then the timed slices of the sizes that come first in the job's order, the sides
  alternating A B C, then C B A, …; a side that has finished its slices of those sizes
  waits at its next sizes until every side has.
A side whose measuring process dies or hangs is handled by its own supervisor; its turn
passes to the next side as soon as it asks again or ends. Memory: every side's model is
resident at once, so each side's guard gets an equal share of the job's limit; time: a
side waits while the others work, so its time limit is the job's times the sides.
"""

import multiprocessing
import os
import select
import signal
from collections.abc import Callable
from dataclasses import replace

from dlbench.measure import compile_cache, turns
from dlbench.run import cell as measuring
from dlbench.run.supervisor import Failure, Limits, die_with_parent

STARTUPS = "DLBENCH_STARTUPS_AT_ONCE"
# A side's group measured as one job measures it (dlbench.run.job._measure):
# (tasks, settings, limits, start) → (final record of each task, failure of each task).
MeasureGroup = Callable[[list, dict, Limits, float], tuple[dict, dict]]


def measure(groups: list[list], settings: dict, limits: Limits, start: float,
            measure_group: MeasureGroup, slice_s: float = turns.SLICE_S) -> tuple[dict, dict]:
    """Each task's final record and each failed task's failure, over every group, the
    groups measured side by side."""
    order = list(dict.fromkeys(task.cell.middle for group in groups for task in group))
    positions = {middle: index for index, middle in enumerate(order)}
    share = replace(limits, timeout_s=limits.timeout_s * len(groups),
                    memory_mb=limits.memory_mb / len(groups))
    startups = min(startups_at_once(), len(groups))
    context = multiprocessing.get_context("fork")
    to_sides = [os.pipe() for _ in groups]  # (read: the side's, write: the coordinator's)
    from_sides = [os.pipe() for _ in groups]  # (read: the coordinator's, write: the side's)
    results = [context.Pipe(duplex=False) for _ in groups]
    every_fd = [fd for pair in to_sides + from_sides for fd in pair]
    sides = []
    for index, group in enumerate(groups):
        own = (to_sides[index][0], from_sides[index][1])
        baton = turns.Baton(*own, positions, len(groups), slice_s, startups)
        sides.append(context.Process(target=_side, args=(
            group, settings, share, start, measure_group, baton,
            [fd for fd in every_fd if fd not in own], results[index][1])))
        sides[-1].start()
    for index in range(len(groups)):
        os.close(to_sides[index][0])
        os.close(from_sides[index][1])
        results[index][1].close()
    previous = signal.signal(signal.SIGTERM, lambda signum, frame: _forward(sides, signum))
    try:
        answers = Coordinator([w for _, w in to_sides], [r for r, _ in from_sides],
                              startups).serve(sides, [r for r, _ in results])
    finally:
        signal.signal(signal.SIGTERM, previous)
        for fd in [w for _, w in to_sides] + [r for r, _ in from_sides]:
            os.close(fd)
    finals, failures = {}, {}
    for group, side, answer in zip(groups, sides, answers, strict=True):
        if answer is None:  # the side's supervisor itself died: none of its cells is known
            reason = f"crashed: the side's supervising process exited with {side.exitcode}"
            failures.update({task: Failure("error", reason) for task in group})
            continue
        side_finals, side_failures = answer
        finals.update({group[i]: record for i, record in side_finals.items()})
        failures.update({group[i]: failure for i, failure in side_failures.items()})
    return finals, failures


def startups_at_once() -> int:
    """How many sides may start up at once: one per CPU this job may use (a start-up's
    imports run on one core), or DLBENCH_STARTUPS_AT_ONCE (1: one side at a time, each
    start-up's figures its own)."""
    asked = os.environ.get(STARTUPS)
    if not asked:
        return len(os.sched_getaffinity(0))
    if not asked.isdigit() or int(asked) < 1:
        raise ValueError(f"{STARTUPS} must be a whole number of at least 1, not {asked!r}")
    return int(asked)


def _side(group: list, settings: dict, limits: Limits, start: float,
          measure_group: MeasureGroup, baton: turns.Baton, others: list[int], answer) -> None:
    """A side's process: supervise its group's measuring processes, which take turns with
    `baton`, and send back what they measured (by each task's position in the group)."""
    for fd in others:  # the other sides' pipes: their ends must close when they end
        os.close(fd)
    die_with_parent()
    measuring.BATON = baton
    if settings.get("round") is not None:  # each recipe compiles into a cache of its own
        compile_cache.prepare(min(task.cell.id for task in group), settings["round"])
    finals, failures = measure_group(group, settings, limits, start)
    index = {task: i for i, task in enumerate(group)}
    answer.send(({index[t]: r for t, r in finals.items()},
                 {index[t]: f for t, f in failures.items()}))
    answer.close()


def _forward(sides: list, signum: int) -> None:
    """SIGTERM to the job: to every side, whose supervisor stops its measuring process."""
    for side in sides:
        if side.is_alive():
            os.kill(side.pid, signum)


class Coordinator:
    """Hands the CPU to the sides (see the module): `G` down a side's pipe is its turn,
    which ends when the side asks again (`S`, `W` or `T <position>`) or ends. Up to
    `startups` sides start up at once; any other turn is a side's alone."""

    def __init__(self, grants: list[int], asks: list[int], startups: int = 1):
        self.grants, self.asks, self.startups = grants, asks, startups
        # Each side's last request: "start" (not yet asked), "S", "W", ("T", position),
        # "held" (granted), "done".
        self.wants: list = ["start"] * len(grants)
        self.holders: dict[int, str] = {}  # the sides holding a turn: "S", "W" or "T"
        self.next_work = 0  # work goes round the sides from here
        self.forward = False  # the direction of the next pass of timed slices
        self.passing: list[int] = []  # the sides still to time a slice in this pass
        self.pending = [b""] * len(grants)

    def serve(self, sides: list, answers: list) -> list:
        """Coordinate until every side has ended; each side's answer (None if it sent
        none)."""
        received: list = [None] * len(sides)
        open_answers = set(range(len(sides)))
        while any(want != "done" for want in self.wants):
            watched = {side.sentinel: ("ended", i) for i, side in enumerate(sides)
                       if self.wants[i] != "done"}
            watched.update({self.asks[i]: ("asked", i) for i in range(len(sides))
                            if self.wants[i] != "done"})
            watched.update({answers[i].fileno(): ("answer", i) for i in open_answers})
            for ready in select.select(list(watched), [], [])[0]:
                what, i = watched[ready]
                if what == "asked":
                    self._read(i)
                elif what == "answer":
                    try:
                        received[i] = answers[i].recv()
                    except EOFError:
                        pass
                    open_answers.discard(i)
                elif not (answers[i].poll() if i in open_answers else False):
                    self._ended(i)  # its answer, if any, was read first
            self._grant()
        return received

    def _read(self, side: int) -> None:
        data = os.read(self.asks[side], 4096)
        *lines, self.pending[side] = (self.pending[side] + data).split(b"\n")
        for line in lines:
            if line.startswith(b"T"):
                self.wants[side] = ("T", int(line[2:]))
            else:  # a start-up (S) or other work (W, alone)
                self.wants[side] = "S" if line == b"S" else "W"
            self.holders.pop(side, None)

    def _ended(self, side: int) -> None:
        self.wants[side] = "done"
        self.holders.pop(side, None)

    def _grant(self) -> None:
        while (side := self._next()) is not None:
            want = self.wants[side]
            self.wants[side], self.holders[side] = "held", want if want in ("S", "W") else "T"
            try:
                os.write(self.grants[side], b"G")
            except OSError:  # no process of the side is left to read it: it is ending
                del self.holders[side]

    def _next(self) -> int | None:
        """The side whose turn it is: work first, round the sides (start-ups beside
        start-ups, up to `startups` at once; other work alone); timed slices once no side
        has work left or holds a turn, at the first position any side is at, A B C then
        C B A."""
        if any(kind != "S" for kind in self.holders.values()):
            return None  # a side works or times alone
        n = len(self.wants)
        for step in range(n):
            side = (self.next_work + step) % n
            want = self.wants[side]
            if (want == "S" and len(self.holders) < self.startups) or \
                    (want == "W" and not self.holders):
                self.next_work = side + 1
                return side
        if self.holders or "start" in self.wants:  # start-ups still running or to come
            return None
        timed = {i: want[1] for i, want in enumerate(self.wants) if isinstance(want, tuple)}
        if not timed:
            return None
        first = min(timed.values())
        eligible = [i for i, position in timed.items() if position == first]
        self.passing = [i for i in self.passing if i in eligible]
        if not self.passing:
            self.forward = not self.forward
            self.passing = sorted(eligible, reverse=not self.forward)
        return self.passing.pop(0)
