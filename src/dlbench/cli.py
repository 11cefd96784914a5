"""The dlbench command: `run` measures one cell, `aggregate` joins results, `list` shows names."""

import argparse
import os
import sys
import time
import traceback
from pathlib import Path

from dlbench import devices, env, result
from dlbench.axes import DEVICES, FRAMEWORKS
from dlbench.matrix import Cell
from dlbench.models import MODELS
from dlbench.optimizations import OPTIMIZATIONS


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text} is not a positive integer")
    return value


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="dlbench", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)

    run = commands.add_parser("run", help="measure one cell and write its JSON")
    run.add_argument("--framework", required=True, choices=FRAMEWORKS)
    run.add_argument("--model", required=True, choices=list(MODELS))
    run.add_argument("--device", required=True, choices=DEVICES)
    run.add_argument("--batch", required=True, type=_positive_int)
    run.add_argument("--seqlen", required=True, type=_positive_int)
    run.add_argument("--optimization", required=True, choices=list(OPTIMIZATIONS))
    run.add_argument("--warmup-iterations", type=int, default=3)
    run.add_argument("--min-duration-s", type=float, default=1.0)
    run.add_argument("--min-iterations", type=_positive_int, default=10)
    run.add_argument("--threads", type=_positive_int, default=2)
    run.add_argument("--interop-threads", type=_positive_int, default=1)
    run.add_argument("--seed", type=int, default=0)
    run.add_argument("--out", required=True, type=Path, help="the result JSON to write")

    agg = commands.add_parser("aggregate", help="join result JSONs into one summary table")
    agg.add_argument("results", nargs="+", type=Path)
    agg.add_argument("--parquet", required=True, type=Path)
    agg.add_argument("--csv", required=True, type=Path)

    commands.add_parser("list", help="print the known models, optimizations and devices")
    return parser


def _run(args: argparse.Namespace, process_start: float) -> int:
    from dlbench.measure.memory import peak_rss_mb, reset_peak
    from dlbench.measure.timing import PhaseClock

    cell = Cell(args.framework, args.model, args.device, args.batch, args.seqlen,
                args.optimization)
    settings = {
        "warmup_iterations": args.warmup_iterations,
        "min_duration_s": args.min_duration_s,
        "min_iterations": args.min_iterations,
        "threads": args.threads,
        "interop_threads": args.interop_threads,
        "seed": args.seed,
    }
    record = {
        "schema_version": result.SCHEMA_VERSION,
        "cell_id": cell.id,
        "params": cell.params(),
        "params_hash": result.params_hash(cell.params()),
        "status": "unsupported",
        "reason": cell.unsupported_reason(),
        "started_at": result.now(),
        "settings": settings,
        "threads": None,
        "startup": {},
        "timing": None,
        "throughput": None,
        "memory": None,
    }
    if record["reason"] is None and cell.device == "gpu":
        record["reason"] = devices.gpu_problem()
    if record["reason"] is None:
        with devices.exclusive(cell.device) as waited:
            clock = PhaseClock(process_start)
            record["startup"] = clock.marks
            clock.marks["lock_wait_s"] = round(waited, 4)
            record.update(_measure(cell, settings, clock, reset_peak, peak_rss_mb))
    record["finished_at"] = result.now()
    record["environment"] = env.fingerprint()
    result.validate(record)
    result.write_json_atomic(args.out, record)
    print(f"{cell.id}: {record['status']}" + (f" ({record['reason']})" if record["reason"] else ""))
    return 0


def _measure(cell: Cell, settings: dict, clock, reset_peak, peak_rss_mb) -> dict:
    """Status, reason and measurements; any exception becomes an `error` or `oom` cell."""
    from dlbench.frameworks import load_backend
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


def _list() -> int:
    print("models:")
    for spec in MODELS.values():
        print(f"  {spec.name:26} {spec.description} (max {spec.max_positions} positions)")
    print("optimizations:")
    for opt in OPTIMIZATIONS.values():
        print(f"  {opt.name:26} {opt.description} [{', '.join(sorted(opt.frameworks))}]")
    print(f"frameworks: {', '.join(FRAMEWORKS)}\ndevices: {', '.join(DEVICES)}")
    return 0


def main(argv: list[str] | None = None) -> int:
    process_start = _process_start()
    args = _parser().parse_args(argv)
    if args.command == "run":
        return _run(args, process_start)
    if args.command == "aggregate":
        from dlbench.aggregate import aggregate

        try:
            aggregate(args.results, args.parquet, args.csv)
        except result.ResultError as exc:
            print(f"dlbench aggregate: {exc}", file=sys.stderr)
            return 1
        return 0
    return _list()


def _process_start() -> float:
    """When this process started (wall clock), so start-up cost includes the interpreter."""
    try:
        import psutil

        return psutil.Process().create_time()
    except Exception:
        return time.time()


if __name__ == "__main__":
    sys.exit(main())
