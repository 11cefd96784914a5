"""A cell's record: made when the cell starts, completed with what the supervisor saw, and
written (validated, atomically) when it is final."""

from datetime import datetime
from pathlib import Path

from dlbench.files import atomic
from dlbench.measure import env
from dlbench.measure.flags import cell_flags
from dlbench.measure.sampler import GpuSampler, ProcessSampler
from dlbench.plan.matrix import Cell
from dlbench.records import result


def new_record(cell: Cell, settings: dict, started: float | None = None) -> dict:
    """A record of the cell's parameters; started: when its process started (else now)."""
    return {
        "schema_version": result.SCHEMA_VERSION,
        "cell_id": cell.id,
        "params": cell.params(),
        "params_hash": result.params_hash(cell.params()),
        "protocol": cell.protocol(),
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
    """Stamp, fingerprint, validate and write a final record."""
    record["finished_at"] = result.now()
    record["environment"] = env.fingerprint()
    result.validate(record)
    atomic.write_json_atomic(path, record)


def annotate(record: dict, sampler: ProcessSampler, gpu: GpuSampler | None) -> dict:
    """Add the supervisor's view: utilization during the timed loop, the memory peaks of
    the cell's process tree (the whole cell, and the timed loop), and the flags."""
    if record["status"] != "ok":
        return record
    start = _unix_time(record["started_at"])  # the cell's start (for the first, the process's)
    end = _unix_time(record["finished_at"])
    loop_start = start + record["startup"]["first_timed_iteration_s"]
    loop_end = loop_start + record["timing"]["loop_s"]
    slices = record["timing"].get("slices")
    # Side by side, the loop's own slices: the other recipes' turns between are theirs.
    record["utilization"] = sampler.windows(
        [(s["started_at"], s["started_at"] + s["seconds"]) for s in slices]) if slices \
        else sampler.window(loop_start, loop_end)
    if slices and record["utilization"] and all("steal_fraction" in s for s in slices):
        # The measuring process read the machine's counters at each slice's ends (exact,
        # where the samples inside a slice miss its edges; and what a test plants there).
        seconds = sum(s["seconds"] for s in slices) or 1.0
        record["utilization"]["steal_fraction"] = round(
            sum(s["steal_fraction"] * s["seconds"] for s in slices) / seconds, 4)
    memory = record["memory"]
    memory["sampled_peak_rss_mb"] = sampler.peak_rss_mb(start, end)
    if gpu:  # NVML's view of the cell's process tree: its window, whatever the CPU window
        record["utilization"] = {**(record["utilization"] or {}),
                                 **(gpu.window(loop_start, loop_end) or {}),
                                 "gpu_process_memory_peak_mb": gpu.memory_peak_mb(start, end)}
        memory["device_process_peak_mb"] = gpu.memory_peak_mb(start, end)
        memory["device_process_steady_peak_mb"] = gpu.memory_peak_mb(loop_start, loop_end)
    record["flags"] = cell_flags(record, [record["utilization"]])
    return record


def _unix_time(timestamp: str) -> float:
    return datetime.fromisoformat(timestamp).timestamp()
