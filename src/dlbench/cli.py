"""The dlbench command: `run` measures one cell, `aggregate` joins results, `list` shows names."""

import argparse
import sys
import time
from pathlib import Path

from dlbench import result
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

    run = commands.add_parser(
        "run", help="measure one cell, or a group of cells in one process, and write their "
        "JSONs")
    run.add_argument("--framework", required=True, choices=FRAMEWORKS)
    run.add_argument("--model", required=True, choices=list(MODELS))
    run.add_argument("--device", required=True, choices=DEVICES)
    run.add_argument("--batch", required=True, type=_positive_int, nargs="+",
                     help="one or more batch sizes (several: see --out-dir)")
    run.add_argument("--seqlen", required=True, type=_positive_int, nargs="+",
                     help="one or more sequence lengths (several: see --out-dir)")
    run.add_argument("--optimization", required=True, choices=list(OPTIMIZATIONS))
    run.add_argument("--warmup-iterations", type=int, default=3)
    run.add_argument("--min-duration-s", type=float, default=1.0)
    run.add_argument("--min-iterations", type=_positive_int, default=10)
    run.add_argument("--threads", type=_positive_int, default=2)
    run.add_argument("--interop-threads", type=_positive_int, default=1)
    run.add_argument("--seed", type=int, default=0)
    run.add_argument("--sample-hz", type=float, default=100,
                     help="memory and CPU sampling rate of the supervisor (0: off)")
    run.add_argument("--repeats", type=_positive_int, default=1,
                     help="measure the cells in this many fresh processes")
    run.add_argument("--timeout-s", type=float, default=1800,
                     help="stop a cell still running after this long (an `error`)")
    run.add_argument("--max-host-memory-gib", type=float, default=0,
                     help="stop a cell above this host memory (an `oom`); 0: 90%% of the RAM")
    run.add_argument("--weights", type=Path,
                     help="shared weights (model.safetensors from dlbench.reference); "
                     "default: random from the seed")
    reference = run.add_mutually_exclusive_group()
    reference.add_argument("--reference", type=Path,
                           help="reference output (.npz from dlbench.reference) of one cell")
    reference.add_argument("--reference-dir", type=Path,
                           help="the folder of the model's reference outputs (b<B>_s<S>.npz)")
    out = run.add_mutually_exclusive_group(required=True)
    out.add_argument("--out", type=Path, help="the result JSON of one cell")
    out.add_argument("--out-dir", type=Path,
                     help="write <cell id>.json here for every batch × length: one process "
                     "measures them all (a group)")
    run.add_argument("--failed-out", type=Path,
                     help="with --out: where the cell's record goes if it crashes or times "
                     "out (default: ../failed/<name> beside --out; with --out-dir: ../failed)")

    agg = commands.add_parser("aggregate", help="join result JSONs into one summary table")
    agg.add_argument("results", nargs="+", type=Path)
    agg.add_argument("--parquet", required=True, type=Path)
    agg.add_argument("--csv", required=True, type=Path)

    rep = commands.add_parser("report", help="render the HTML report of a summary")
    rep.add_argument("--notebook", required=True, type=Path, help="jupytext percent script")
    rep.add_argument("--summary", required=True, type=Path)
    rep.add_argument("--executed", required=True, type=Path, help="the executed notebook")
    rep.add_argument("--out", required=True, type=Path, help="the HTML to write")

    check = commands.add_parser("check", help="validate a config file and count its cells")
    check.add_argument("config", type=Path)

    commands.add_parser("list", help="print the known models, optimizations and devices")
    return parser


def _run(args: argparse.Namespace, process_start: float) -> int:
    from dlbench import reference, runner

    cells = [Cell(args.framework, args.model, args.device, batch, seqlen, args.optimization)
             for batch in args.batch for seqlen in args.seqlen]
    if args.out is not None and (len(cells) > 1 or args.reference_dir):
        sys.exit("dlbench run: --out names one cell's result; for several batch sizes or "
                 "lengths use --out-dir (and --reference-dir)")
    if args.out_dir is not None and (args.reference or args.failed_out):
        sys.exit("dlbench run: --reference and --failed-out name one cell's files; with "
                 "--out-dir, give --reference-dir (failed records go to ../failed)")
    settings = {
        "warmup_iterations": args.warmup_iterations,
        "min_duration_s": args.min_duration_s,
        "min_iterations": args.min_iterations,
        "threads": args.threads,
        "interop_threads": args.interop_threads,
        "seed": args.seed,
        "repeats": args.repeats,
        "sample_hz": args.sample_hz,
        "timeout_s": args.timeout_s,
        "max_host_memory_gib": args.max_host_memory_gib,
        "weights": args.weights and str(args.weights),
    }
    if args.out is not None:
        failed = args.failed_out or args.out.parent.parent / "failed" / args.out.name
        tasks = [runner.Task(cells[0], args.out, failed, args.reference and str(args.reference))]
    else:
        failed_dir = args.out_dir.parent / "failed"
        tasks = [
            runner.Task(cell, args.out_dir / f"{cell.id}.json",
                        failed_dir / f"{cell.id}.json",
                        args.reference_dir and str(args.reference_dir / reference.output_name(
                            cell.batch, cell.seqlen)))
            for cell in cells
        ]
    return runner.run(tasks, settings, process_start)


def _check(path: Path) -> int:
    """Validate a config before a long run: every problem at once, then what would run."""
    from collections import Counter

    from dlbench import config
    from dlbench.matrix import expand_cells

    try:
        cells = expand_cells(config.load_file(path))
    except config.ConfigError as exc:
        print(exc, file=sys.stderr)
        return 1
    reasons = Counter(r for c in cells if (r := c.unsupported_reason()))
    print(f"{path}: valid, {len(cells)} cells, {len(cells) - reasons.total()} to measure")
    for reason, count in reasons.most_common():
        print(f"  {count} unsupported: {reason}")
    return 0


def _list() -> int:
    print("models:")
    for spec in MODELS.values():
        longest = spec.max_positions or "unbounded"
        print(f"  {spec.name:26} {spec.description} (max {longest} positions)")
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
    if args.command == "check":
        return _check(args.config)
    if args.command == "report":
        from dlbench.report import render

        render(args.notebook, args.summary, args.executed, args.out)
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
