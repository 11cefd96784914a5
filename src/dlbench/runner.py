"""Run one cell: a supervising process forks the measuring child and waits for it.

The supervisor never imports a framework. It holds the device lock, waits on the child
without spinning, and turns what the child cannot report itself into a result:
- host memory above the guard's limit → the child is killed, the cell is `oom`;
- a crash (a signal, or an exit without a result) or a hang past the time limit →
  the cell is `error` ("crashed …" / "timed out …"), kept in the failed-record file, and
  the run exits 1 so that Snakemake marks the job failed and a re-run retries it.
"""

import multiprocessing
import os
import signal
import time
import traceback
from pathlib import Path

import psutil

from dlbench import devices, env, faults, result
from dlbench.matrix import Cell

POLL_S = 0.1  # how often the supervisor looks at the child's memory (a blocking wait)


def new_record(cell: Cell, settings: dict) -> dict:
    return {
        "schema_version": result.SCHEMA_VERSION,
        "cell_id": cell.id,
        "params": cell.params(),
        "params_hash": result.params_hash(cell.params()),
        "status": "unsupported",
        "reason": None,
        "started_at": result.now(),
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


def run(cell: Cell, settings: dict, out: Path, failed_out: Path, process_start: float) -> int:
    """Measure the cell and write its result; the exit status of `dlbench run`."""
    record = new_record(cell, settings)
    record["reason"] = cell.unsupported_reason()
    if record["reason"] is None and cell.device == "gpu":
        record["reason"] = devices.gpu_problem()
    if record["reason"] is not None:
        finish(record, out)
        return _done(record, failed_out)
    with devices.exclusive(cell.device) as waited:
        record["startup"]["lock_wait_s"] = round(waited, 4)
        record["device_lock"] = {"acquired_at": result.now()}
        child = multiprocessing.get_context("fork").Process(
            target=_child, args=(cell, settings, record, out, process_start), daemon=True
        )
        child.start()
        try:
            failure = _supervise(child, settings)
        except _Stopped as stop:
            _kill(child)
            failure = "error", str(stop)
    if failure is None and out.exists():
        return _done(result.read(out), failed_out)
    status, reason = failure or ("error", _crash_reason(child.exitcode))
    record.update(status=status, reason=reason)
    record["device_lock"]["released_at"] = result.now()
    if status == "oom":  # a result like any other: the matrix goes on
        finish(record, out)
        return _done(record, failed_out)
    finish(record, failed_out)
    print(f"{cell.id}: {status} ({reason}); kept in {failed_out}")
    return 1


def _done(record: dict, failed_out: Path) -> int:
    failed_out.unlink(missing_ok=True)  # an earlier failure of this cell is superseded
    reason = f" ({record['reason']})" if record["reason"] else ""
    print(f"{record['cell_id']}: {record['status']}{reason}")
    return 0


class _Stopped(Exception):
    """SIGTERM reached the supervisor: a cancelled job, or the scheduler's time limit."""


def _on_sigterm(signum, frame):
    raise _Stopped("stopped: the job received SIGTERM (cancelled, or past the scheduler's "
                   "time limit)")


def _supervise(child, settings: dict) -> tuple[str, str] | None:
    """Wait for the child; (status, reason) if it had to be stopped, else None.

    Ctrl-C (SIGINT) is not caught: an interrupted cell leaves no record and is simply
    measured again by the next run.
    """
    signal.signal(signal.SIGTERM, _on_sigterm)
    limit_mb = memory_limit_mb(settings["max_host_memory_gib"])
    deadline = time.monotonic() + settings["timeout_s"]
    process = psutil.Process(child.pid)
    while True:
        child.join(POLL_S)  # blocks on the child's exit: no CPU taken from the cell
        if child.exitcode is not None:
            return None
        rss_mb = _tree_rss_mb(process)
        if rss_mb > limit_mb:
            _kill(child)
            return "oom", (
                f"host memory of the cell reached {rss_mb / 1024:.1f} GiB, above the guard's "
                f"limit of {limit_mb / 1024:.1f} GiB (measurement.max_host_memory_gib)"
            )
        if time.monotonic() > deadline:
            _kill(child)
            return "error", (
                f"timed out: still running after {settings['timeout_s']:g} s "
                "(measurement.timeout_s)"
            )


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


def _child(cell: Cell, settings: dict, record: dict, out: Path, process_start: float):
    """The measuring process: imports the framework, measures, writes the result."""
    from dlbench.measure.timing import PhaseClock

    clock = PhaseClock(process_start)
    clock.marks.update(record["startup"])
    record["startup"] = clock.marks
    record.update(_measure(cell, settings, clock))
    record["device_lock"]["released_at"] = result.now()  # the parent releases it on exit
    finish(record, out)
    os._exit(0)  # no interpreter teardown: frameworks can hang or crash in it


def _measure(cell: Cell, settings: dict, clock) -> dict:
    """Status, reason and measurements; any exception becomes an `error` or `oom` cell."""
    from dlbench.frameworks import load_backend
    from dlbench.measure.memory import peak_rss_mb, reset_peak
    from dlbench.scenarios.inference import Settings, measure

    # Thread pools read these when the framework loads; Snakemake's values must not win.
    for name in env.THREAD_VARIABLES:
        os.environ[name] = str(settings["threads"])
    backend = None
    try:
        backend = load_backend(cell.framework, cell.device, settings["threads"],
                               settings["interop_threads"])
        clock.mark("imports_done_s")
        problem = backend.device_problem()
        if problem:
            return {"status": "unsupported", "reason": problem}
        faults.inject(cell.id)
        threads = {**backend.thread_settings(), "env": env.thread_variables()}
        peak_method = "VmHWM after clear_refs" if reset_peak() else "ru_maxrss (process lifetime)"
        measured = measure(backend, cell, Settings(
            settings["warmup_iterations"], settings["min_duration_s"],
            settings["min_iterations"], settings["seed"]), clock)
        memory = {"peak_host_rss_mb": peak_rss_mb(), "method": peak_method}
        return {"status": "ok", "reason": None, "threads": threads, "memory": memory,
                "details": backend.versions(), **measured}
    except Exception as exc:
        traceback.print_exc()
        oom = backend is not None and backend.is_out_of_memory(exc)
        return {"status": "oom" if oom else "error", "reason": f"{type(exc).__name__}: {exc}"}
