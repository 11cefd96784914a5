"""Run one cell: a supervising process forks the measuring child and waits for it.

The supervisor never imports a framework. It holds the device lock, waits on the child
without spinning, and turns what the child cannot report itself into a result:
- host memory above the guard's limit → the child is killed, the cell is `oom`;
- a crash (a signal, or an exit without a result) or a hang past the time limit →
  the cell is `error` ("crashed …" / "timed out …"), kept in the failed-record file, and
  the run exits 1 so that Snakemake marks the job failed and a re-run retries it.
"""

import itertools
import multiprocessing
import os
import signal
import time
import traceback
from pathlib import Path

import psutil

from dlbench import devices, env, faults, result
from dlbench.matrix import Cell
from dlbench.measure.sampler import GpuSampler, ProcessSampler
from dlbench.measure.stats import between_processes, summarize

GUARD_HZ = 10  # how often the memory guard and the time limit are checked
UNSTABLE_RELATIVE_IQR = 0.10  # a cell whose IQR exceeds this fraction of its median
NOISY_STEAL_FRACTION = 0.05  # a cell measured while the host stole more of the CPU


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


def run(cell: Cell, settings: dict, out: Path, failed_out: Path, process_start: float) -> int:
    """Measure the cell and write its result; the exit status of `dlbench run`."""
    record = new_record(cell, settings, started=process_start)
    record["reason"] = cell.unsupported_reason()
    if record["reason"] is None and cell.device == "gpu":
        record["reason"] = devices.gpu_problem()
    if record["reason"] is not None:
        finish(record, out)
        return _done(record, failed_out)
    with devices.exclusive(cell.device) as waited:
        record["startup"]["lock_wait_s"] = round(waited, 4)
        record["device_lock"] = {"acquired_at": result.now()}
        measured, failure = [], None
        for repeat in range(settings["repeats"]):
            start = process_start if repeat == 0 else time.time()  # a fresh process each
            outcome, failure = _measure_in_child(cell, settings, record, out, start)
            if failure:
                break
            measured.append(outcome)
            if outcome["status"] != "ok":
                break  # an error or unsupported cell does not get better by repeating
        released_at = result.now()  # still inside: the next cell cannot have started yet
    if failure is None:
        final = _combine(measured)
        final["device_lock"]["released_at"] = released_at
        finish(final, out)
        return _done(final, failed_out)
    status, reason = failure
    record.update(status=status, reason=reason)
    record["device_lock"]["released_at"] = released_at
    if status == "oom":  # a result like any other: the matrix goes on
        finish(record, out)
        return _done(record, failed_out)
    finish(record, failed_out)
    print(f"{cell.id}: {status} ({reason}); kept in {failed_out}")
    return 1


def _measure_in_child(cell, settings, record, out, start) -> tuple[dict | None, tuple | None]:
    """(the child's record with what the supervisor saw added, None) or (None, failure)."""
    path = out.with_name(f".{out.name}.child")
    child = multiprocessing.get_context("fork").Process(
        target=_child, args=(cell, settings, record, path, start), daemon=True
    )
    child.start()
    sampler = ProcessSampler(child.pid)
    gpu = GpuSampler.open(child.pid) if cell.device == "gpu" else None
    try:
        failure = _supervise(child, sampler, gpu, settings)
    except _Stopped as stop:
        _kill(child)
        failure = "error", str(stop)
    finally:
        if gpu:
            gpu.close()
    if failure is None and not path.exists():
        failure = "error", _crash_reason(child.exitcode)
    if failure:
        path.unlink(missing_ok=True)
        return None, failure
    child_record = result.read(path)
    path.unlink()
    return _annotate(child_record, sampler, gpu, start), None


def _annotate(record: dict, sampler: ProcessSampler, gpu: GpuSampler | None,
              start: float) -> dict:
    """Add the supervisor's view: sampled memory, utilization in the loop, stability flags."""
    if record["status"] != "ok":
        return record
    loop_start = start + record["startup"]["first_timed_iteration_s"]
    loop_end = loop_start + record["timing"]["loop_s"]
    record["utilization"] = sampler.window(loop_start, loop_end)
    if gpu and record["utilization"] is not None:
        record["utilization"].update(gpu.window(loop_start, loop_end) or {})
    record["memory"]["sampled_peak_rss_mb"] = sampler.peak_rss_mb()
    record["flags"] = _flags(record["timing"]["relative_iqr"], [record["utilization"]])
    return record


def _flags(relative_iqr: float, windows: list[dict | None]) -> dict:
    steal = max((w["steal_fraction"] for w in windows if w), default=None)
    reasons = []
    if relative_iqr > UNSTABLE_RELATIVE_IQR:
        reasons.append(f"unstable: IQR is {relative_iqr:.0%} of the median "
                       f"(limit {UNSTABLE_RELATIVE_IQR:.0%})")
    if steal is not None and steal > NOISY_STEAL_FRACTION:
        reasons.append(f"noisy machine: {steal:.0%} of the CPU time was stolen by the host "
                       f"(limit {NOISY_STEAL_FRACTION:.0%}); re-run this cell")
    return {"unstable": relative_iqr > UNSTABLE_RELATIVE_IQR,
            "noisy_machine": bool(steal is not None and steal > NOISY_STEAL_FRACTION),
            "reasons": reasons}


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
    final["flags"] = _flags(timing["relative_iqr"], [r.get("utilization") for r in records])
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


def _supervise(child, sampler: ProcessSampler, gpu: GpuSampler | None,
               settings: dict) -> tuple[str, str] | None:
    """Wait for the child, sampling it; (status, reason) if it had to be stopped, else None.

    Ctrl-C (SIGINT) is not caught: an interrupted cell leaves no record and is simply
    measured again by the next run.
    """
    signal.signal(signal.SIGTERM, _on_sigterm)
    limit_mb = memory_limit_mb(settings["max_host_memory_gib"])
    deadline = time.monotonic() + settings["timeout_s"]
    process = psutil.Process(child.pid)
    # Wake up sample_hz times a second (or only for the guard, at GUARD_HZ, when 0).
    wait_s = 1 / max(settings["sample_hz"], GUARD_HZ)
    guard_every = max(1, round(settings["sample_hz"] / GUARD_HZ))
    for tick in itertools.count():
        child.join(wait_s)  # blocks on the child's exit: no CPU taken from the cell
        if child.exitcode is not None:
            return None
        if settings["sample_hz"]:
            sampler.sample()
        if tick % guard_every:
            continue
        if gpu:
            gpu.sample()
        rss_mb = _tree_rss_mb(process)  # with the child's own children (compile workers)
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
        # measure() returns status and reason itself where the device cannot run the
        # optimization (they override "ok" below).
        measured = measure(backend, cell, Settings(
            settings["warmup_iterations"], settings["min_duration_s"],
            settings["min_iterations"], settings["seed"],
            weights=settings.get("weights"), reference=settings.get("reference")), clock)
        memory = {"peak_host_rss_mb": peak_rss_mb(), "method": peak_method}
        return {"status": "ok", "reason": None, "threads": threads, "memory": memory,
                "details": backend.versions(), **measured}
    except Exception as exc:
        traceback.print_exc()
        oom = backend is not None and backend.is_out_of_memory(exc)
        return {"status": "oom" if oom else "error", "reason": f"{type(exc).__name__}: {exc}"}
