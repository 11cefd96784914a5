"""`dlbench run`: measure a job's cells (one, or a group measured by one process) and write
every cell's result.

Cells that cannot apply are recorded at once, without a framework. The others are measured
under the device's host-wide lock by measuring children that the supervisor watches (see
supervisor.py); what a child cannot report itself becomes the cell's result:
- host memory above the guard's limit → `oom`;
- a crash or a hang past the time limit → `error` ("crashed …" / "timed out …"); so does a
  crash that the child survived and reported (a loader worker of its input pipeline
  died: its record says `crashed`). Alone, the
  cell is kept in its failed-record file and the run exits 1, so that Snakemake marks the
  job failed and a re-run retries it. In a group, the cell's result says so, a fresh child
  measures the cells after it, and the run succeeds: failing the job would make Snakemake
  delete the group's other results.

With `retry_noisy: N`, a cell whose result has a noise flag is measured again (fresh
processes, the same lock), up to N times; the cleanest attempt is kept, and every attempt
is recorded in its `attempts`. So are the earlier jobs of the cell that failed (their
record in its failed-record file), when a job is retried.

In a round of the run (`--round`, measurement.rounds), a cell that crashes gets its error
record as a group's does, and the job succeeds: the workflow runs a round's jobs one after
the other, and a failed job would stop the rounds after it. The last round's job
(`rounds_dir`) keeps each cell's record of the round beside the earlier rounds' and writes
their combination as the cell's result (dlbench.run.rounds). The compilers' caches of the
job's cells are kept from its first round for its later ones (dlbench.measure.compile_cache).
"""

import time
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

from dlbench.files import atomic
from dlbench.measure import compile_cache, devices
from dlbench.measure.flags import NOISE, noisy
from dlbench.plan.matrix import Cell
from dlbench.records import result
from dlbench.records.record import annotate, finish, new_record
from dlbench.run import rounds, side_by_side
from dlbench.run.cell import measure_cells
from dlbench.run.supervisor import Failure, Limits, memory_limit_mb, run_jobs


@dataclass(frozen=True, eq=False)
class Task:
    """One cell to measure, where its result goes, and the shared files it reads."""

    cell: Cell
    out: Path
    failed_out: Path
    inputs: dict[str, str | None] = field(default_factory=dict)

    def settings(self, settings: dict) -> dict:
        """The settings recorded with the cell: the run's, and its inputs."""
        return {**settings, **self.inputs}


def run(tasks: list[Task], settings: dict, process_start: float,
        rounds_dir: Path | None = None) -> int:
    """Measure the tasks' cells and write every result; the exit status of `dlbench run`."""
    # A crash fails the job only where nothing after it in the job or the run waits.
    grouped = len(tasks) > 1 or settings.get("round") is not None
    measurable = []
    for task in tasks:
        reason = task.cell.unsupported_reason()
        if reason is None and task.cell.device == "gpu":
            reason = devices.gpu_problem()
        if reason is None:
            measurable.append(task)
            continue
        record = new_record(task.cell, task.settings(settings), started=process_start)
        record["reason"] = reason
        finish(record, task.out)
        _done(record, task.failed_out)
    if not measurable:
        return 0
    groups = recipes(measurable)
    if settings.get("round"):  # a group's sizes take turns at coming first, round by round
        groups = [group[settings["round"] % len(group):]
                  + group[:settings["round"] % len(group)] for group in groups]
    measurable = [task for group in groups for task in group]
    device = measurable[0].cell.device
    limits = Limits(settings["timeout_s"], memory_limit_mb(settings["max_host_memory_gib"]),
                    settings["sample_hz"], gpu=device == "gpu",
                    profile=settings.get("profile", False))
    if settings.get("round") is not None and len(groups) == 1:  # side by side: per side
        compile_cache.prepare(min(task.cell.id for task in measurable), settings["round"])
    with devices.exclusive(device) as waited:
        lock = {"acquired_at": result.now()}
        if len(groups) > 1:
            finals, failures = side_by_side.measure(groups, settings, limits, process_start,
                                                    _measure)
        else:
            finals, failures = _measure(measurable, settings, limits, process_start)
        lock["released_at"] = result.now()  # still inside: the next job cannot have started
    exit_status = 0
    for task in measurable:
        failure = failures.get(task)
        if failure is None:
            final = finals[task]
        else:
            final = new_record(task.cell, task.settings(settings), started=process_start)
            final.update(status=failure.status, reason=failure.reason)
        final["device_lock"] = lock
        final["startup"]["lock_wait_s"] = round(waited, 4)
        earlier = _earlier_attempts(task)
        if earlier:
            final["attempts"] = earlier + (final.get("attempts") or [_summary(final, True)])
        keep_as_failed = failure is not None and failure.status == "error" and (
            not grouped or failure.stops_run)
        if keep_as_failed:
            finish(final, task.failed_out)
            print(f"{task.cell.id}: {failure.status} ({failure.reason}); kept in "
                  f"{task.failed_out}")
            exit_status = 1
        elif rounds_dir is None:
            finish(final, task.out)
            _done(final, task.failed_out)
        else:
            _finish_last_round(task, final, settings["round"], rounds_dir)
    return exit_status


def recipes(tasks: list[Task]) -> list[list[Task]]:
    """The tasks by recipe (framework and optimization), in their order: one group each,
    measured side by side when there are several (dlbench.run.side_by_side)."""
    found: dict[tuple[str, str], list[Task]] = {}
    for task in tasks:
        found.setdefault((task.cell.framework, task.cell.optimization), []).append(task)
    return list(found.values())


def _finish_last_round(task: Task, final: dict, round_: int, rounds_dir: Path) -> None:
    """Keep the cell's record of this, its last round, with the others, and write their
    combination as its result."""
    finish(final, rounds.round_path(rounds_dir, round_, task.cell.id))
    combined = rounds.combine(task.cell, rounds.records(rounds_dir, round_, task.cell.id))
    result.validate(combined)
    atomic.write_json_atomic(task.out, combined)
    _done(combined, task.failed_out)


def _measure(tasks: list[Task], settings: dict, limits: Limits,
             process_start: float) -> tuple[dict, dict]:
    """Each task's final record (its repeats combined; with retry_noisy, the cleanest of
    its attempts), and the failure of each task that has no record."""
    def attempt(jobs: list[Task], start: float) -> tuple[dict, dict]:
        records, failures = run_jobs(jobs, partial(measure_cells, settings=settings),
                                     lambda task: task.out, limits, settings["repeats"],
                                     start, annotate)
        for task in jobs:  # a crash the child reported is a crash, as one it died of
            crash = next((r for r in records[task] if r.pop("crashed", False)), None)
            if crash and task not in failures:
                failures[task] = Failure("error", crash["reason"])
        return {task: task.cell.spec.combine(records[task]) for task in jobs
                if task not in failures}, failures

    finals, failures = attempt(tasks, process_start)
    attempts: dict[Task, list[dict]] = {task: [record] for task, record in finals.items()}
    for _ in range(settings.get("retry_noisy", 0)):
        again = [task for task in finals if noisy(finals[task].get("flags"))]
        if not again:
            break
        more, failed = attempt(again, time.time())
        for task in again:
            attempts[task].append(more.get(task) or _failed(task, settings, failed[task]))
            finals[task] = min(attempts[task], key=_noise)
        if any(failure.stops_run for failure in failed.values()):
            break  # SIGTERM: keep what was measured, start nothing more
    for task, tried in attempts.items():
        if len(tried) > 1:
            finals[task]["attempts"] = [_summary(record, record is finals[task])
                                        for record in tried]
    return finals, failures


def _failed(task: Task, settings: dict, failure: Failure) -> dict:
    record = new_record(task.cell, task.settings(settings))
    record.update(status=failure.status, reason=failure.reason, finished_at=result.now())
    return record


def _noise(record: dict) -> tuple:
    """How noisy an attempt is, the cleanest smallest: no noise flag, fewest flags, the
    narrowest interval of the median."""
    if record["status"] != "ok":
        return (2, 0, 0.0)
    flags = record.get("flags") or {}
    timing = record["timing"]
    return (int(noisy(flags)), sum(bool(flags.get(name)) for name in NOISE),
            timing.get("median_ci95_half_width") or timing["relative_iqr"])


def _summary(record: dict, kept: bool) -> dict:
    """An attempt as recorded in the kept record's `attempts`."""
    summary = {"status": record["status"], "kept": kept, "started_at": record["started_at"],
               "reason": record["reason"]}
    if record["status"] == "ok":
        timing = record["timing"]
        summary.update(median_ms=timing["median_ms"],
                       median_ci95_ms=timing["median_ci95_ms"],
                       iterations=timing["iterations"],
                       flags=(record.get("flags") or {}).get("reasons", []))
    return summary


def _earlier_attempts(task: Task) -> list[dict]:
    """The attempts of the cell's earlier jobs that failed (a crash, a time limit, a stop
    by the scheduler), as its failed-record file keeps them: a job retried (SLURM's
    retry, a re-run) counts them in its record. Those of other parameters do not count,
    nor the stand-in that recovery.py writes for a cell without a record (a job killed
    outright, or never started: no attempt is known)."""
    try:
        earlier = result.read(task.failed_out)
    except result.ResultError:
        return []  # none (or unreadable: the attempt cannot be counted)
    if earlier["params_hash"] != result.params_hash(task.cell.params()) \
            or "device_lock" not in earlier:  # written by a job, which held the device
        return []
    return [{**attempt, "kept": False}
            for attempt in earlier.get("attempts") or [_summary(earlier, False)]]


def _done(record: dict, failed_out: Path) -> None:
    failed_out.unlink(missing_ok=True)  # an earlier failure of this cell is superseded
    reason = f" ({record['reason']})" if record["reason"] else ""
    flags = "; ".join((record.get("flags") or {}).get("reasons", []))
    print(f"{record['cell_id']}: {record['status']}{reason}" + (f" [{flags}]" if flags else ""))
