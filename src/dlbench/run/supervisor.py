"""The supervisor: fork a child that works through a list of jobs, writing one record file
per job as it finishes it; wait for the child without spinning; stop it when its process
tree uses too much memory, when a job runs past its time limit or when SIGTERM arrives;
turn a crash into a failure of the job it was on; and start a fresh child for the jobs
after a failed one. It knows no framework and no scenario: a record is a JSON object with a
`status`, and the work is whatever function it is given.
"""

import ctypes
import itertools
import multiprocessing
import os
import select
import signal
import sys
import time
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

import psutil

from dlbench.files import atomic, scratch
from dlbench.measure.sampler import GpuSampler, ProcessSampler
from dlbench.records import result
from dlbench.run import scheduler
from dlbench.run.profiler import Watch

GUARD_HZ = 10  # how often the memory guard and the time limit are checked
_PR_SET_PDEATHSIG = 1  # prctl's option, from <linux/prctl.h>


@dataclass(frozen=True)
class Limits:
    timeout_s: float  # per job: restarts whenever the child has finished a job
    memory_mb: float  # the child's process tree
    sample_hz: float  # memory sampling (0: only the guard, at GUARD_HZ)
    gpu: bool = False  # also sample the GPU (NVML)
    profile: bool = False  # record a flame graph of each job's timed loop (profiler.py)


class Failure(NamedTuple):
    """Why the child could not report a job itself."""

    status: str  # "oom" or "error"
    reason: str
    stops_run: bool = False  # SIGTERM: no further job is started


# The work of a child: (its jobs, the record path of each, the Unix time its cost starts
# from, the repeat: 0, 1, …). It writes each job's record to its path, in order.
Work = Callable[[list, list[Path], float, int], None]
Annotate = Callable[[dict, ProcessSampler, GpuSampler | None], dict]


def run_jobs(jobs: Sequence[Hashable], work: Work, record_path: Callable[[Hashable], Path],
             limits: Limits, repeats: int, start: float,
             annotate: Annotate) -> tuple[dict, dict]:
    """Each job's records (one per repeat, annotated with what the supervisor sampled),
    and the failure of each job that could not finish.

    Every repeat is a fresh child that works through the jobs in order; when a child dies
    at a job, a new one goes on with the jobs after it. SIGTERM stops the run: the jobs
    not finished by then fail with its reason.
    """
    records: dict = {job: [] for job in jobs}
    failures: dict = {}
    _Sigterm.received, _Sigterm.armed = None, False
    previous = signal.signal(signal.SIGTERM, _on_sigterm)
    try:
        for repeat in range(repeats):
            # An error or unsupported job does not get better by repeating.
            pending = [job for job in jobs if job not in failures
                       and all(r["status"] == "ok" for r in records[job])]
            while pending:
                if _Sigterm.received:  # it came while no child ran: start none
                    return records, _stopped(jobs, records, failures, repeats,
                                             Failure("error", _Sigterm.received, stops_run=True))
                done, failure = run_child(pending, work, record_path, limits, start, annotate,
                                          repeat)
                start = time.time()  # later children's cost starts when they are started
                for job, record in zip(pending, done, strict=False):
                    records[job].append(record)
                pending = pending[len(done):]
                if failure is None:
                    continue
                if failure.stops_run:
                    return records, _stopped(jobs, records, failures, repeats, failure)
                failures[pending[0]] = failure
                pending = pending[1:]
    finally:
        signal.signal(signal.SIGTERM, previous)
    return records, failures


def _stopped(jobs, records: dict, failures: dict, repeats: int, failure: Failure) -> dict:
    """The failures of a stopped run: those before, the job it stopped, and those it never
    reached. A job with all its records is done, even if the signal came after the last."""
    unfinished = [job for job in jobs if job not in failures and len(records[job]) < repeats
                  and all(r["status"] == "ok" for r in records[job])]
    failures = dict(failures)
    for position, job in enumerate(unfinished):
        failures[job] = failure if position == 0 else failure._replace(
            reason=f"not measured: the run was stopped before it ({failure.reason})")
    return failures


def run_child(jobs: list, work: Work, record_path: Callable[[Hashable], Path], limits: Limits,
              start: float, annotate: Annotate,
              repeat: int = 0) -> tuple[list[dict], Failure | None]:
    """The records of the jobs one child finished, in order, and the failure of the job
    after them if the child could not go on."""
    paths = [_child_path(record_path(job)) for job in jobs]
    # Its temporary files in a folder of its own, removed below: it ends with os._exit,
    # so what its libraries would remove at exit stays (dlbench.files.scratch).
    temporary = scratch.private()
    # Not daemonic: the child must be able to start processes of its own (input-pipeline
    # workers, compile workers). The supervisor kills or joins it on every path.
    child = multiprocessing.get_context("fork").Process(
        target=_child_main, args=(work, jobs, paths, start, repeat, temporary))
    child.start()
    # The CPU and machine counters at the guard's rate (10 Hz), memory at sample_hz.
    sampler = ProcessSampler(child.pid, load_every=_guard_every(limits))
    gpu = GpuSampler.open(child.pid) if limits.gpu else None
    watch = Watch(child.pid, [record_path(job) for job in jobs], paths) if limits.profile \
        else None
    try:
        failure = _supervised(child, sampler, gpu, limits, paths, watch)
    except _Stopped as stop:
        _kill(child)
        failure = Failure("error", str(stop), stops_run=True)
    except KeyboardInterrupt:  # Ctrl-C: no record, the next run measures the job again
        _kill(child)
        raise
    finally:
        sampler.close()
        if gpu:
            gpu.close()
        profiles = watch.close() if watch else {}
        scratch.remove(temporary)
    done = []
    for index, path in enumerate(paths):
        if not path.exists():
            break
        record = result.read_json(path)
        if watch:
            record["profile"] = profiles.get(index, {
                "status": "failed", "reason": "no timed loop was marked: nothing to profile"})
        done.append(annotate(record, sampler, gpu))
    for path in paths:
        path.unlink(missing_ok=True)
    if failure is None and len(done) < len(jobs):
        if child.exitcode in atomic.DISK_FULL_ERRNOS:  # no record can be written: stop
            raise atomic.disk_full(child.exitcode, record_path(jobs[len(done)]))
        failure = Failure("error", _crash_reason(child.exitcode))
    return done, failure


def _child_main(work: Work, jobs: list, paths: list[Path], start: float, repeat: int,
                temporary: Path) -> None:
    # The child dies with the supervisor (a job SIGKILLed, by hand or by the scheduler): an
    # orphan would measure on unwatched, holding the device lock it inherited.
    die_with_parent()
    scratch.use(temporary)
    # Ctrl-C reaches the whole process group; the supervisor alone handles it, so that
    # the child's death is never mistaken for a crash of the job.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    try:
        work(jobs, paths, start, repeat)
    except atomic.DiskFull as full:
        # Its status is the errno (28, 122 or 27): the supervisor then stops the run with
        # a message naming the record's own path, not this child's temporary one.
        os._exit(full.errno)
    os._exit(0)  # no interpreter teardown: frameworks can hang or crash in it


def die_with_parent() -> None:
    """SIGKILL this process when its parent dies (Linux's PR_SET_PDEATHSIG; elsewhere
    nothing), and if it died already before this was set."""
    if not sys.platform.startswith("linux"):
        return
    parent = os.getppid()
    ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent:
        os._exit(1)


def _child_path(path: Path) -> Path:
    return path.with_name(f".{path.name}.child")


class _Stopped(Exception):
    """SIGTERM reached the supervisor: a cancelled job, or the scheduler's time limit."""


class _Sigterm:
    """SIGTERM interrupts only the wait for a child (`armed`); anywhere else (starting a
    child, reading its records) it is noted in `received`, and no further child starts."""

    armed = False
    received: str | None = None


def _on_sigterm(signum, frame):
    _Sigterm.received = scheduler.stop_reason()
    if _Sigterm.armed:
        raise _Stopped(_Sigterm.received)


def _supervised(*args) -> Failure | None:
    """_supervise, with SIGTERM raised as _Stopped while it waits."""
    _Sigterm.armed = True
    try:
        if _Sigterm.received:  # it came while the child was starting
            raise _Stopped(_Sigterm.received)
        return _supervise(*args)
    finally:
        _Sigterm.armed = False


def _supervise(child, sampler: ProcessSampler, gpu: GpuSampler | None, limits: Limits,
               paths: list[Path], watch: Watch | None) -> Failure | None:
    """Wait for the child, sampling it; the failure of the job it was on if it had to be
    stopped, else None. The time limit applies to each job: it restarts whenever the child
    has written a job's record.

    Ctrl-C (SIGINT) is not caught: an interrupted job leaves no record and is simply
    measured again by the next run.
    """
    deadline, finished = time.monotonic() + limits.timeout_s, 0
    # Wake up sample_hz times a second (or only for the guard, at GUARD_HZ, when 0).
    wait_s = 1 / max(limits.sample_hz, GUARD_HZ)
    guard_every = _guard_every(limits)
    for tick in itertools.count():
        # Blocks until the child exits or the time is up: no CPU taken from the job.
        if select.select([child.sentinel], [], [], wait_s)[0] and child.exitcode is not None:
            return None
        if limits.sample_hz:
            sampler.sample()
        if tick % guard_every:
            continue
        if gpu:
            gpu.sample(sampler.pids)
        if watch:
            watch.poll()
        if len(paths) > 1 and (now_finished := sum(p.exists() for p in paths)) > finished:
            deadline, finished = time.monotonic() + limits.timeout_s, now_finished
        # The tree's memory as the sampler last saw it (its children are looked for once
        # a second: the search scans every process of the machine).
        if tick % (guard_every * GUARD_HZ) == 0:
            sampler.refresh_tree()
        rss_mb = sampler.tree_rss_mb()
        if rss_mb > limits.memory_mb:
            _kill(child)
            return Failure("oom", (
                f"host memory of the cell reached {rss_mb / 1024:.1f} GiB, above the guard's "
                f"limit of {limits.memory_mb / 1024:.1f} GiB (measurement.max_host_memory_gib)"
            ))
        if time.monotonic() > deadline:
            _kill(child)
            return Failure("error", (
                f"timed out: still running after {limits.timeout_s:g} s "
                "(measurement.timeout_s)"
            ))


def _guard_every(limits: Limits) -> int:
    """Every how many wake-ups the guard (and the CPU counters) run: GUARD_HZ times a second."""
    return max(1, round(limits.sample_hz / GUARD_HZ))


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
