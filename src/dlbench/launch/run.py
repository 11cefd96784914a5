"""`dlbench run`: measure a job's cells (one, or a group measured by one process) and write
every cell's result.

Cells that cannot apply are recorded at once, without a framework. The others are measured
under the device's host-wide lock by measuring children that the supervisor watches (see
supervisor.py); what a child cannot report itself becomes the cell's result:
- host memory above the guard's limit → `oom`;
- a crash or a hang past the time limit → `error` ("crashed …" / "timed out …"). Alone, the
  cell is kept in its failed-record file and the run exits 1, so that Snakemake marks the
  job failed and a re-run retries it. In a group, the cell's result says so, a fresh child
  measures the cells after it, and the run succeeds: failing the job would make Snakemake
  delete the group's other results.
"""

from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

from dlbench import devices, result
from dlbench.launch.supervisor import Limits, memory_limit_mb, run_jobs
from dlbench.matrix import Cell
from dlbench.measure.cell import measure_cells
from dlbench.record import annotate, finish, new_record


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


def run(tasks: list[Task], settings: dict, process_start: float) -> int:
    """Measure the tasks' cells and write every result; the exit status of `dlbench run`."""
    grouped = len(tasks) > 1
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
    device = measurable[0].cell.device
    limits = Limits(settings["timeout_s"], memory_limit_mb(settings["max_host_memory_gib"]),
                    settings["sample_hz"], gpu=device == "gpu",
                    profile=settings.get("profile", False))
    with devices.exclusive(device) as waited:
        lock = {"acquired_at": result.now()}
        records, failures = run_jobs(measurable, partial(measure_cells, settings=settings),
                                     lambda task: task.out, limits, settings["repeats"],
                                     process_start, annotate)
        lock["released_at"] = result.now()  # still inside: the next job cannot have started
    exit_status = 0
    for task in measurable:
        failure = failures.get(task)
        if failure is None:
            final = task.cell.spec.combine(records[task])
        else:
            final = new_record(task.cell, task.settings(settings), started=process_start)
            final.update(status=failure.status, reason=failure.reason)
        final["device_lock"] = lock
        final["startup"]["lock_wait_s"] = round(waited, 4)
        keep_as_failed = failure is not None and failure.status == "error" and (
            not grouped or failure.stops_run)
        if keep_as_failed:
            finish(final, task.failed_out)
            print(f"{task.cell.id}: {failure.status} ({failure.reason}); kept in "
                  f"{task.failed_out}")
            exit_status = 1
        else:
            finish(final, task.out)
            _done(final, task.failed_out)
    return exit_status


def _done(record: dict, failed_out: Path) -> None:
    failed_out.unlink(missing_ok=True)  # an earlier failure of this cell is superseded
    reason = f" ({record['reason']})" if record["reason"] else ""
    flags = "; ".join((record.get("flags") or {}).get("reasons", []))
    print(f"{record['cell_id']}: {record['status']}{reason}" + (f" [{flags}]" if flags else ""))
