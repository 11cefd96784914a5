"""Run cells: a supervising process forks the measuring child and waits for it.

One cell per process by default; a group (the batch × length cells that share framework,
model, device and optimization) is measured by one child, one cell after the other, so
that the framework's import is paid once (measurement.process: per_group).

The supervisor never imports a framework. It holds the device lock, waits on the child
without spinning, and turns what the child cannot report itself into a result:
- host memory above the guard's limit → the child is killed, the cell is `oom`;
- a crash (a signal, or an exit without a result) or a hang past the time limit →
  the cell is `error` ("crashed …" / "timed out …"). Alone, the cell is kept in the
  failed-record file and the run exits 1, so that Snakemake marks the job failed and a
  re-run retries it. In a group, the cell's result says so, a fresh child measures the
  cells after it, and the run succeeds: failing the job would make Snakemake delete the
  group's other results.
"""

import gc
import itertools
import multiprocessing
import os
import select
import signal
import time
import traceback
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import NamedTuple

import psutil

from dlbench import devices, env, faults, result
from dlbench.matrix import Cell
from dlbench.measure.flags import flags
from dlbench.measure.sampler import GpuSampler, ProcessSampler
from dlbench.measure.stats import between_processes, summarize

GUARD_HZ = 10  # how often the memory guard and the time limit are checked


@dataclass(frozen=True)
class Task:
    """One cell to measure, where its result goes, and its reference output (if any)."""

    cell: Cell
    out: Path
    failed_out: Path
    reference: str | None = None


class Failure(NamedTuple):
    """Why the child could not report a cell itself."""

    status: str  # "oom" or "error"
    reason: str
    stops_run: bool = False  # SIGTERM: no further cell is started


def new_record(cell: Cell, settings: dict, started: float | None = None) -> dict:
    """A record of the cell's parameters; started: when its process started (else now)."""
    return {
        "schema_version": result.SCHEMA_VERSION,
        "cell_id": cell.id,
        "params": cell.params(),
        "params_hash": result.params_hash(cell.params()),
        "status": "unsupported",
        "reason": None,
        "started_at": result.now(started),
        "settings": settings,
        "threads": None,
        "startup": {},
        "timing": None,
        "throughput": None,
        "memory": None,
    }


def finish(record: dict, path: Path) -> None:
    record["finished_at"] = result.now()
    record["environment"] = env.fingerprint()
    result.validate(record)
    result.write_json_atomic(path, record)


def memory_limit_mb(max_host_memory_gib: float) -> float:
    """The guard's limit: the configured one, else 90% of what this job may use."""
    if max_host_memory_gib > 0:
        return max_host_memory_gib * 1024
    limits = [psutil.virtual_memory().total / 2**20]
    try:
        cgroup = Path("/sys/fs/cgroup/memory.max").read_text().strip()
        if cgroup != "max":
            limits.append(int(cgroup) / 2**20)
    except (OSError, ValueError):
        pass
    if os.environ.get("SLURM_MEM_PER_NODE", "").isdigit():
        limits.append(float(os.environ["SLURM_MEM_PER_NODE"]))
    return 0.9 * min(limits)


def cell_settings(settings: dict, task: Task) -> dict:
    """The settings recorded with a cell: the run's, with the cell's reference output."""
    return {**settings, "reference": task.reference}


def run(tasks: list[Task], settings: dict, process_start: float) -> int:
    """Measure the cells (several: a group, in one child) and write every result; the
    exit status of `dlbench run`."""
    grouped = len(tasks) > 1
    measurable = []
    for task in tasks:
        reason = task.cell.unsupported_reason()
        if reason is None and task.cell.device == "gpu":
            reason = devices.gpu_problem()
        if reason is None:
            measurable.append(task)
            continue
        record = new_record(task.cell, cell_settings(settings, task), started=process_start)
        record["reason"] = reason
        finish(record, task.out)
        _done(record, task.failed_out)
    if not measurable:
        return 0
    with devices.exclusive(measurable[0].cell.device) as waited:
        lock = {"acquired_at": result.now()}
        records, failures = _measure_all(measurable, settings, process_start)
        lock["released_at"] = result.now()  # still inside: the next job cannot have started
    exit_status = 0
    for task in measurable:
        failure = failures.get(task)
        if failure is None:
            final = _combine(records[task])
        else:
            final = new_record(task.cell, cell_settings(settings, task), started=process_start)
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


def _measure_all(tasks: list[Task], settings: dict,
                 process_start: float) -> tuple[dict[Task, list[dict]], dict[Task, Failure]]:
    """Each task's records (one per repeat), or the failure that stopped it.

    Every repeat is a fresh child that measures the tasks in order; when a child dies at
    a cell, a new one goes on with the cells after it.
    """
    records: dict[Task, list[dict]] = {task: [] for task in tasks}
    failures: dict[Task, Failure] = {}
    start = process_start  # the first child's cost includes this process's start
    for _ in range(settings["repeats"]):
        # An error or unsupported cell does not get better by repeating.
        pending = [t for t in tasks if t not in failures
                   and all(r["status"] == "ok" for r in records[t])]
        while pending:
            done, failure = _measure_in_child(pending, settings, start)
            start = time.time()
            for task, record in done:
                records[task].append(record)
            pending = pending[len(done):]
            if failure is None:
                continue
            failures[pending[0]] = failure
            pending = pending[1:]
            if failure.stops_run:
                for task in pending:
                    failures[task] = failure._replace(
                        reason=f"not measured: the run was stopped before it ({failure.reason})")
                return records, failures
    return records, failures


def _child_path(task: Task) -> Path:
    return task.out.with_name(f".{task.out.name}.child")


def _measure_in_child(tasks: list[Task], settings: dict,
                      start: float) -> tuple[list[tuple[Task, dict]], Failure | None]:
    """The records of the tasks the child measured, in order, with what the supervisor
    saw added; and the failure of the task after them, if the child could not go on."""
    paths = [_child_path(task) for task in tasks]
    child = multiprocessing.get_context("fork").Process(
        target=_child, args=(tasks, settings, paths, start), daemon=True
    )
    child.start()
    # The CPU and machine counters at the guard's rate (10 Hz), memory at sample_hz.
    sampler = ProcessSampler(child.pid, load_every=_guard_every(settings))
    gpu = GpuSampler.open(child.pid) if tasks[0].cell.device == "gpu" else None
    try:
        failure = _supervise(child, sampler, gpu, settings, paths)
    except _Stopped as stop:
        _kill(child)
        failure = Failure("error", str(stop), stops_run=True)
    except KeyboardInterrupt:  # Ctrl-C: no record, the next run measures the cell again
        _kill(child)
        raise
    finally:
        sampler.close()
        if gpu:
            gpu.close()
    done = []
    for task, path in zip(tasks, paths, strict=True):
        if not path.exists():
            break
        done.append((task, _annotate(result.read_json(path), sampler, gpu)))
    for path in paths:
        path.unlink(missing_ok=True)
    if failure is None and len(done) < len(tasks):
        failure = Failure("error", _crash_reason(child.exitcode))
    return done, failure


def _annotate(record: dict, sampler: ProcessSampler, gpu: GpuSampler | None) -> dict:
    """Add the supervisor's view: sampled memory, utilization in the loop, stability flags."""
    if record["status"] != "ok":
        return record
    start = _unix_time(record["started_at"])  # the cell's start (for the first, the process's)
    loop_start = start + record["startup"]["first_timed_iteration_s"]
    loop_end = loop_start + record["timing"]["loop_s"]
    record["utilization"] = sampler.window(loop_start, loop_end)
    if gpu and record["utilization"] is not None:
        record["utilization"].update(gpu.window(loop_start, loop_end) or {})
    record["memory"]["sampled_peak_rss_mb"] = sampler.peak_rss_mb(
        start, _unix_time(record["finished_at"]))
    record["flags"] = flags(record["timing"]["relative_iqr"], [record["utilization"]])
    return record


def _unix_time(timestamp: str) -> float:
    return datetime.fromisoformat(timestamp).timestamp()


def _combine(records: list[dict]) -> dict:
    """One record from the repeats of a cell: pooled samples, and the spread between them."""
    final = records[0]
    if len(records) == 1 or final["status"] != "ok":
        return final
    repeats = [
        {key: r["timing"][key] for key in ("median_ms", "iqr_ms", "iterations", "cold_start_s")}
        for r in records
    ]
    samples = [x for r in records for x in r["timing"]["samples_ms"]]
    timing = final["timing"]
    if "device_time" in timing:
        device = [x for r in records for x in r["timing"]["device_time"]["samples_ms"]]
        timing["device_time"].update(summarize(device), samples_ms=device)
    timing.update(summarize(samples), samples_ms=samples, iterations=len(samples),
                  loop_s=sum(r["timing"]["loop_s"] for r in records), repeats=repeats,
                  between_processes=between_processes([r["median_ms"] for r in repeats]))
    median_s = timing["median_ms"] / 1e3
    batch, seqlen = final["params"]["batch"], final["params"]["seqlen"]
    final["throughput"] = {"samples_per_s": batch / median_s,
                           "tokens_per_s": batch * seqlen / median_s}
    final["memory"]["peak_host_rss_mb"] = max(r["memory"]["peak_host_rss_mb"] for r in records)
    final["memory"]["sampled_peak_rss_mb"] = max(
        (r["memory"]["sampled_peak_rss_mb"] or 0) for r in records) or None
    final["flags"] = flags(timing["relative_iqr"], [r.get("utilization") for r in records])
    return final


def _done(record: dict, failed_out: Path) -> int:
    failed_out.unlink(missing_ok=True)  # an earlier failure of this cell is superseded
    reason = f" ({record['reason']})" if record["reason"] else ""
    flags = "; ".join((record.get("flags") or {}).get("reasons", []))
    print(f"{record['cell_id']}: {record['status']}{reason}" + (f" [{flags}]" if flags else ""))
    return 0


class _Stopped(Exception):
    """SIGTERM reached the supervisor: a cancelled job, or the scheduler's time limit."""


def _on_sigterm(signum, frame):
    raise _Stopped("stopped: the job received SIGTERM (cancelled, or past the scheduler's "
                   "time limit)")


def _supervise(child, sampler: ProcessSampler, gpu: GpuSampler | None, settings: dict,
               paths: list[Path]) -> Failure | None:
    """Wait for the child, sampling it; the failure of the cell it was measuring if it had
    to be stopped, else None. The time limit applies to each cell: it restarts whenever
    the child has written a cell's record.

    Ctrl-C (SIGINT) is not caught: an interrupted cell leaves no record and is simply
    measured again by the next run.
    """
    signal.signal(signal.SIGTERM, _on_sigterm)
    limit_mb = memory_limit_mb(settings["max_host_memory_gib"])
    deadline, finished = time.monotonic() + settings["timeout_s"], 0
    process = psutil.Process(child.pid)
    # Wake up sample_hz times a second (or only for the guard, at GUARD_HZ, when 0).
    wait_s = 1 / max(settings["sample_hz"], GUARD_HZ)
    guard_every = _guard_every(settings)
    for tick in itertools.count():
        # Blocks until the child exits or the time is up: no CPU taken from the cell.
        if select.select([child.sentinel], [], [], wait_s)[0] and child.exitcode is not None:
            return None
        if settings["sample_hz"]:
            sampler.sample()
        if tick % guard_every:
            continue
        if gpu:
            gpu.sample()
        if len(paths) > 1 and (now_finished := sum(p.exists() for p in paths)) > finished:
            deadline, finished = time.monotonic() + settings["timeout_s"], now_finished
        # The child's memory 10 times a second; once a second with its own children
        # (compile workers), whose search scans every process of the machine.
        rss_mb = _tree_rss_mb(process) if tick % (guard_every * GUARD_HZ) == 0 \
            else _rss_mb(process)
        if rss_mb > limit_mb:
            _kill(child)
            return Failure("oom", (
                f"host memory of the cell reached {rss_mb / 1024:.1f} GiB, above the guard's "
                f"limit of {limit_mb / 1024:.1f} GiB (measurement.max_host_memory_gib)"
            ))
        if time.monotonic() > deadline:
            _kill(child)
            return Failure("error", (
                f"timed out: still running after {settings['timeout_s']:g} s "
                "(measurement.timeout_s)"
            ))


def _guard_every(settings: dict) -> int:
    """Every how many wake-ups the guard (and the CPU counters) run: GUARD_HZ times a second."""
    return max(1, round(settings["sample_hz"] / GUARD_HZ))


def _rss_mb(process: psutil.Process) -> float:
    try:
        return process.memory_info().rss / 2**20
    except psutil.Error:
        return 0.0


def _tree_rss_mb(process: psutil.Process) -> float:
    total = 0
    try:
        for p in [process, *process.children(recursive=True)]:
            total += p.memory_info().rss
    except psutil.Error:
        pass
    return total / 2**20


def _kill(child) -> None:
    try:
        for p in psutil.Process(child.pid).children(recursive=True):
            p.kill()
    except psutil.Error:
        pass
    child.kill()
    child.join()


def _crash_reason(exitcode: int | None) -> str:
    if exitcode is not None and exitcode < 0:
        name = signal.Signals(-exitcode).name
        return f"crashed: the measuring process was killed by {name}"
    return f"crashed: the measuring process exited with status {exitcode} without a result"


def _child(tasks: list[Task], settings: dict, paths: list[Path], process_start: float):
    """The measuring process: imports the framework once, then measures the cells in order,
    writing each one's record (validated and completed by the supervisor) as it is done."""
    from dlbench.measure.timing import PhaseClock

    # Ctrl-C reaches the whole process group; the supervisor alone handles it, so that
    # the child's death is never mistaken for a crash of the cell.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # Thread pools read these when the framework loads; Snakemake's values must not win.
    for name in env.THREAD_VARIABLES:
        os.environ[name] = str(settings["threads"])
    backend, start = None, process_start
    for position, (task, path) in enumerate(zip(tasks, paths, strict=True)):
        record = new_record(task.cell, cell_settings(settings, task), started=start)
        record["process"] = {"cells": len(tasks), "position": position}
        clock = PhaseClock(start)
        record["startup"] = clock.marks
        backend, measured = _measure(task, settings, clock, backend)
        record.update(measured)
        record["finished_at"] = result.now()
        result.write_json_atomic(path, record)
        start = time.time()
    os._exit(0)  # no interpreter teardown: frameworks can hang or crash in it


def _measure(task: Task, settings: dict, clock, backend) -> tuple[object, dict]:
    """The backend (loaded by the first cell) and the cell's status, reason and
    measurements; any exception becomes an `error` or `oom` cell."""
    from dlbench.frameworks import load_backend
    from dlbench.measure.memory import peak_rss_mb, reset_peak, rss_mb
    from dlbench.scenarios.inference import Settings, measure

    cell = task.cell
    gc.collect()  # in a group: the earlier cell's model is gone before this one's peak
    try:
        if backend is None:
            backend = load_backend(cell.framework, cell.device, settings["threads"],
                                   settings["interop_threads"])
            clock.mark("imports_done_s")
        problem = backend.device_problem()
        if problem:
            return backend, {"status": "unsupported", "reason": problem}
        faults.inject(cell.id)
        threads = {**backend.thread_settings(), "env": env.thread_variables()}
        peak_method = "VmHWM after clear_refs" if reset_peak() else "ru_maxrss (process lifetime)"
        rss_at_start_mb = rss_mb()
        # measure() returns status and reason itself where the device cannot run the
        # optimization (they override "ok" below).
        measured = measure(backend, cell, Settings(
            settings["warmup_iterations"], settings["min_duration_s"],
            settings["min_iterations"], settings["seed"],
            weights=settings.get("weights"), reference=task.reference), clock)
        memory = {"peak_host_rss_mb": peak_rss_mb(), "rss_at_start_mb": rss_at_start_mb,
                  "method": peak_method, **measured.pop("memory", {})}
        return backend, {"status": "ok", "reason": None, "threads": threads, "memory": memory,
                         "details": backend.versions(), **measured}
    except Exception as exc:
        traceback.print_exc()
        oom = backend is not None and backend.is_out_of_memory(exc)
        return backend, {"status": "oom" if oom else "error",
                         "reason": f"{type(exc).__name__}: {exc}"}

