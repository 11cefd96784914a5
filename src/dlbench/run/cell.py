"""The measuring process's work: import the framework once, then measure the cells given,
one after the other, each by its scenario, writing each record as soon as it is done."""

import gc
import importlib
import time
import traceback
from functools import partial
from pathlib import Path

from dlbench.catalogue import frameworks
from dlbench.data.pipeline import LoaderDied
from dlbench.files import atomic
from dlbench.measure import compile_cache, env, faults, noise, turns
from dlbench.measure.memory import PhaseMemory, rss_mb
from dlbench.measure.timing import PhaseClock
from dlbench.records import result
from dlbench.records.record import new_record
from dlbench.run import profiler

# In a job forked by a warm parent (dlbench.warm): the parent's pid, its import seconds and
# how many jobs it had started before this one, recorded with every cell of the job.
WARM_PARENT: dict | None = None
# Measured side by side with other recipes (dlbench.run.side_by_side): this side's turns.
BATON: turns.Baton | None = None


def measure_cells(tasks: list, paths: list[Path], start: float, repeat: int,
                  settings: dict) -> None:
    """Runs in the measuring child (the supervisor's work). tasks: dlbench.run.job.Task;
    start: when the cost of the first cell starts (the process's start); repeat: which of
    the cells' fresh processes this is (training seeds each one differently)."""
    if BATON is not None:  # side by side: nothing before this side's first turn, which
        start += turns.take(BATON)  # its start-up figures do not count
    # Thread pools read these when the framework loads; Snakemake's values must not win.
    env.set_thread_variables(settings["threads"])
    # The other frameworks, SciPy, scikit-learn: imported for code that no cell runs.
    frameworks.leave_out_unused_imports(tasks[0].cell.framework)  # one per process
    backend = None
    for position, (task, path) in enumerate(zip(tasks, paths, strict=True)):
        if BATON is not None:
            BATON.measuring(task.cell.middle)
            waited_before = BATON.waited_s
        record = new_record(task.cell, task.settings(settings), started=start)
        record["process"] = {"cells": len(tasks), "position": position,
                             "compile_cache": compile_cache.state(),
                             "warm_parent": WARM_PARENT}
        # Under a profiler (the supervisor's), tell it where the timed loop starts and ends.
        tell_profiler = partial(_signal_phase, path) if settings.get("profile") else None
        clock = PhaseClock(start)
        clock.on_mark = partial(_on_mark, tell_profiler, clock)
        record["startup"] = clock.marks
        # In rounds, the processes of earlier rounds came first (training seeds by it).
        first = (settings.get("round") or 0) * settings["repeats"]
        backend, measured = _measure(task, {**settings, "repeat": first + repeat}, clock,
                                     backend)
        # What the process shared with its earlier cells, as the scenario says (a model).
        record["process"].update(measured.pop("process", {}))
        if BATON is not None:  # the seconds this cell waited while other recipes worked
            record["process"]["side_by_side"] = {
                "sides": BATON.sides, "slice_s": BATON.slice_s, "startups": BATON.startups,
                "sizes": task.cell.middle,
                "waited_s": round(BATON.waited_s - waited_before, 4)}
            if position == 0:  # the process started up for this cell: when (Unix times)
                record["process"]["side_by_side"]["start_up"] = BATON.start_up
        record.update(measured)
        record["finished_at"] = result.now()
        atomic.write_json_atomic(path, record)  # validated and completed by the supervisor
        start = time.time()


def _on_mark(tell_profiler, clock: PhaseClock, phase: str) -> None:
    """A phase reached: side by side, the start-up that other sides' start-ups may share
    ends at the first mark after the imports (inference, generation: the model built; a
    scenario without that mark: its model ready, its tracing included), and the process waits for
    the CPU to itself, a wait that its later marks do not count; under a profiler, tell
    it."""
    if BATON is not None and phase != "imports_done_s":
        clock.process_start += BATON.started()
    if tell_profiler:
        tell_profiler(phase)


def _signal_phase(record: Path, phase: str) -> None:
    """Tell the supervisor that the timed loop starts or ends (its profiler waits for it)."""
    if phase in (profiler.LOOP_START, profiler.LOOP_END):
        profiler.marker(record, phase).touch()


def _measure(task, settings: dict, clock: PhaseClock, backend) -> tuple[object, dict]:
    """The backend (loaded by the first cell) and the cell's status, reason and
    measurements; any exception becomes an `error` or `oom` cell."""
    from dlbench.frameworks import import_ops, load_backend

    cell = task.cell
    gc.collect()  # in a group: the earlier cell's model is gone before this one's peak
    try:
        if backend is None:
            backend = load_backend(cell.framework, cell.device, settings["threads"],
                                   settings["interop_threads"])
            import_ops(cell.framework, cell.scenario)
            clock.mark("imports_done_s")
        problem = backend.device_problem()
        if problem:
            return backend, {"status": "unsupported", "reason": problem}
        faults.inject(cell.id)
        threads = {**backend.thread_settings(), "env": env.thread_variables()}
        # float32 is float32 in every framework and scenario (TF32 only in tf32 cells).
        arithmetic = backend.set_arithmetic(cell.spec.precision(cell.optimization))
        clock.memory = PhaseMemory()  # resets the peak: the cell's own, by phase
        rss_at_start_mb = rss_mb()
        # The scenario returns status and reason itself where the device cannot run the
        # cell (they override "ok" below).
        measured = cell.spec.measure(backend, cell, settings, clock, task.inputs)
        memory = {"peak_host_rss_mb": clock.memory.cell_peak_mb(),
                  "rss_at_start_mb": rss_at_start_mb, "method": clock.memory.method,
                  **measured.pop("memory", {})}
        details = {**backend.versions(), **measured.pop("details", {})}
        if measured.get("status", "ok") == "ok":
            # As long as the cell's timed loop, at most PROBE_S (a test's loops are short).
            seconds = min(noise.PROBE_S, settings.get("min_duration_s") or noise.PROBE_S)
            measured["machine_noise"] = machine_noise(backend, cell.framework, cell.device,
                                                      seconds)
        return backend, {"status": "ok", "reason": None, "threads": threads, "memory": memory,
                         "arithmetic": arithmetic, "details": details, **measured}
    except LoaderDied as exc:
        traceback.print_exc()
        # A crash of a process of the cell, as if the measuring process had died: the
        # supervisor's caller keeps it as a failure, and a re-run measures it again.
        return backend, {"status": "error", "reason": f"crashed: {exc}", "crashed": True}
    except Exception as exc:
        traceback.print_exc()
        oom = backend is not None and backend.is_out_of_memory(exc)
        return backend, {"status": "oom" if oom else "error",
                         "reason": f"{type(exc).__name__}: {exc}"}


def machine_noise(backend, framework: str, device: str, seconds: float) -> dict | None:
    """The machine's own noise right after the cell's timed loop (dlbench.measure.noise):
    the framework's default matrix product, float32, on the cell's threads and device."""
    library = next((lib for lib in frameworks.get(framework).gemm_libraries
                    if device in lib.devices), None)
    if library is None:
        return None
    gemm = importlib.import_module(f"dlbench.frameworks.{framework}.gemm")
    product = gemm.product(backend, library.key, "fp32", noise.SIZE)
    return {"workload": f"{library.name}, {noise.SIZE}×{noise.SIZE} float32",
            **noise.probe(product, backend.synchronize, seconds)}
