"""The dlbench command: `run` measures cells, `aggregate` joins results, `report` renders
the report, `compare` compares two result sets, `peak` measures the machine's GEMM peak,
`check` validates a config, `list` shows the known names."""

import argparse
import os
import sys
import time
from pathlib import Path

from dlbench import scenarios
from dlbench.catalogue.axes import DEVICES, FRAMEWORKS
from dlbench.catalogue.precisions import PRECISIONS
from dlbench.files import atomic, paths
from dlbench.plan import settings
from dlbench.plan.matrix import DEFAULT_SCENARIO, Cell
from dlbench.records import result


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The command line, `dlbench run`'s with the options of the scenario it names."""
    return _parser(_scenario_named(sys.argv[1:] if argv is None else argv)).parse_args(argv)


def _scenario_named(argv: list[str]) -> str:
    """The scenario that a `dlbench run` command line names (the default where it names
    none, or one that is not registered: the full parser then says so)."""
    first = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
    first.add_argument("--scenario", default=DEFAULT_SCENARIO)
    named = first.parse_known_args(argv)[0].scenario
    return named if named in scenarios.scenarios() else DEFAULT_SCENARIO


def _parser(scenario_name: str = DEFAULT_SCENARIO) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="dlbench", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    scenario = scenarios.get(scenario_name)

    run = commands.add_parser(
        "run", help="measure one cell, or a group of cells in one process, and write their "
        "JSONs", description="Measure one cell, or a group of cells in one process. The "
        f"sizes, settings and inputs below are those of scenario {scenario.name}; "
        "`dlbench run --scenario=NAME --help` lists another's.")
    run.add_argument("--scenario", default=DEFAULT_SCENARIO,
                     choices=list(scenarios.scenarios()))
    run.add_argument("--framework", required=True, choices=FRAMEWORKS)
    run.add_argument("--model", required=True, choices=scenario.models())
    run.add_argument("--device", required=True, choices=DEVICES)
    run.add_argument("--optimization", required=True, choices=scenario.optimizations())
    scenario.axes_codec().add_options(run)
    settings.add_options(run)
    run.add_argument("--protocol", type=int,
                     help="the revision of how the cells are measured, as the workflow "
                     "expects it (checked: this dlbench measures each cell one way only)")
    scenario.add_input_options(run)
    scenario.add_setting_options(run)
    out = run.add_mutually_exclusive_group(required=True)
    out.add_argument("--out", type=Path, help="the result JSON of one cell")
    out.add_argument("--out-dir", type=Path,
                     help="write <cell id>.json here for every combination of the sizes "
                     "given: one process measures them all (a group)")
    run.add_argument("--failed-out", type=Path,
                     help="with --out: where the cell's record goes if it crashes or times "
                     "out (default: ../failed/<name> beside --out; with --out-dir: ../failed)")
    run.add_argument("--beside", nargs="+", default=[], metavar="FRAMEWORK:OPTIMIZATION",
                     help="with --out-dir: measure these recipes' cells of the same sizes "
                     "too, side by side with --framework's --optimization: a process per "
                     "recipe, all started at once, taking turns at the CPU and timing in "
                     "alternating slices (on the CPU)")
    run.add_argument("--round", type=int,
                     help="the round of the run this job measures (measurement.rounds: 0, "
                     "1, …): its processes come after the earlier rounds' (training seeds "
                     "by them), and a cell that crashes gets its error record instead of "
                     "failing the job, so that the rounds after it run")
    run.add_argument("--rounds-dir", type=Path,
                     help="with --round, the last round: also write each cell's record of "
                     "this round to <dir>/r<round>/, then combine its records of every "
                     "round found there into the result (--out, --out-dir)")

    agg = commands.add_parser("aggregate", help="join result JSONs into one summary table")
    agg.add_argument("results", nargs="+", type=Path)
    agg.add_argument("--parquet", required=True, type=Path)
    agg.add_argument("--csv", required=True, type=Path)
    agg.add_argument("--provenance", type=Path,
                     help="also write what re-running the matrix takes here (JSON)")
    agg.add_argument("--config", default="{}", help="the workflow's config, as JSON")
    agg.add_argument("--configfiles", nargs="*", default=[], help="the config files given")
    agg.add_argument("--mix-foreign", action="store_true",
                     help="compare cells measured on another machine or by another dlbench "
                     "version than most cells (default: mark them and leave them out)")

    rep = commands.add_parser("report", help="render the HTML report of a summary")
    rep.add_argument("--notebook", required=True, type=Path, help="jupytext percent script")
    rep.add_argument("--summary", required=True, type=Path)
    rep.add_argument("--executed", required=True, type=Path, help="the executed notebook")
    rep.add_argument("--out", required=True, type=Path, help="the HTML to write")
    rep.add_argument("--peaks", nargs="*", type=Path, default=[],
                     help="the machine's GEMM peaks (`dlbench peak`'s JSON files), the "
                     "ceiling of the efficiency section")

    peak = commands.add_parser(
        "peak", help="measure the GEMM peak of a device, precision and thread count (the "
        "ceiling of the report's efficiency section): every library's matrix product, each "
        "in a process of its own, the best named; write it as JSON")
    peak.add_argument("--device", required=True, choices=DEVICES)
    peak.add_argument("--precision", required=True, choices=list(PRECISIONS))
    peak.add_argument("--threads", required=True, type=int)
    peak.add_argument("--out", required=True, type=Path)
    peak.add_argument("--seconds", type=float, default=2.0,
                      help="how long to multiply, per library (default: %(default)s)")
    peak.add_argument("--size", type=int, action="append",
                      help="the matrices' side, repeatable (default: sizes where the "
                      "product is compute-bound)")
    from dlbench.run.peak import ATTEMPTS, LIBRARIES, QUIET_WAIT_S

    peak.add_argument("--attempts", type=int, default=ATTEMPTS,
                      help="CPU: measure a library that did not get the cores of its "
                      "threads again, up to this many attempts in all (default: %(default)s)")
    peak.add_argument("--quiet-wait-s", type=float, default=QUIET_WAIT_S,
                      help="CPU: before each attempt, wait up to this many seconds for the "
                      "machine to be quiet (no other work on its cores; default: "
                      "%(default)s)")
    which = peak.add_mutually_exclusive_group()
    which.add_argument("--library", choices=list(LIBRARIES),
                       help="measure this library only, in this process")
    which.add_argument("--libraries", nargs="+", choices=list(LIBRARIES),
                       help="measure these libraries (default: every one of the device)")
    which.add_argument("--combine", nargs="+", type=Path, metavar="RECORD",
                       help="join these library records (`--library`'s) into the peak")

    cmp = commands.add_parser(
        "compare", help="compare two result sets cell by cell: changes of the median (for "
        "training, the wall time per step) with their interval and significance, "
        "regressions first; with --interleave, measure two checkouts or configs "
        "alternately first")
    for name, which in (("baseline", "the baseline"), ("new", "the new set")):
        cmp.add_argument(name, type=Path, help=f"{which}: a results folder (its runs/*.json, "
                         "with samples) or a summary (.parquet or .csv); with --interleave, "
                         "a checkout (a folder with a Snakefile) or a config file")
    cmp.add_argument("--csv", type=Path, help="write the comparison as CSV")
    cmp.add_argument("--html", type=Path, help="write the comparison as an HTML page")
    cmp.add_argument("--notebook", type=Path, help="the page's notebook (default: "
                     "workflow/notebooks/compare.py of this checkout)")
    cmp.add_argument("--executed", type=Path, help="keep the executed notebook here")
    cmp.add_argument("--floor", type=float,
                     help="sides measured one after the other: widen the interval of "
                     "new/baseline by this fraction either way, for the drift between runs "
                     "(default: dlbench.analysis.compare.DRIFT_FLOOR; not used for "
                     "interleaved sides)")
    cmp.add_argument("--interleave", action="store_true",
                     help="measure the two sides first, each cell alternately in fresh "
                     "processes (A B, B A, …) for --rounds rounds, then compare them round "
                     "by round: drift falls on both sides alike")
    cmp.add_argument("--rounds", type=int, default=4,
                     help="with --interleave: rounds per cell (default: %(default)s)")
    cmp.add_argument("--configfile", type=Path,
                     help="with --interleave: the config that checkout sides run (default: "
                     "their own config/config.yaml)")
    cmp.add_argument("--work-dir", type=Path, default=Path("interleave"),
                     help="with --interleave: where the sides' workflows run and their "
                     "results go, <dir>/<side>/interleaved (default: %(default)s)")

    check = commands.add_parser("check", help="validate a config file and count its cells")
    check.add_argument("config", type=Path)

    commands.add_parser("list", help="print the known models, optimizations and devices")
    return parser


def run_cells(args: argparse.Namespace) -> list[Cell]:
    """The cells a `dlbench run` command line names: every combination of its sizes."""
    import itertools

    scenario = scenarios.get(args.scenario)
    missing = [f"--{a.name}" for a in scenario.axes if getattr(args, a.name) is None]
    if missing:
        sys.exit(f"dlbench run: scenario {scenario.name!r} needs {' and '.join(missing)}")
    names = [axis.name for axis in scenario.axes]
    recipes = [(args.framework, args.optimization)] + [_recipe(text, scenario)
                                                       for text in args.beside]
    if len(set(recipes)) < len(recipes):
        sys.exit("dlbench run: --beside names a recipe twice (or --framework's own)")
    return [Cell(scenario.name, framework, args.model, args.device, optimization,
                 tuple(zip(names, sizes, strict=True)))
            for framework, optimization in recipes
            for sizes in itertools.product(*(getattr(args, name) for name in names))]


def _recipe(text: str, scenario) -> tuple[str, str]:
    """A --beside recipe, FRAMEWORK:OPTIMIZATION, checked."""
    framework, _, optimization = text.partition(":")
    if framework not in FRAMEWORKS or optimization not in scenario.optimizations():
        sys.exit(f"dlbench run: --beside {text!r}: give FRAMEWORK:OPTIMIZATION, a framework "
                 f"of {', '.join(FRAMEWORKS)} and an optimization of scenario "
                 f"{scenario.name} (`dlbench list`)")
    return framework, optimization


def _run(args: argparse.Namespace, argv: list[str], process_start: float) -> int:
    from dlbench import warm
    from dlbench.run import cell
    from dlbench.run import job as run

    scenario = scenarios.get(args.scenario)
    cells = run_cells(args)
    wrong = [c.id for c in cells if args.protocol is not None and c.protocol() != args.protocol]
    if wrong:
        sys.exit(f"dlbench run: {wrong[0]} is measured with protocol {cells[0].protocol()} by "
                 f"this dlbench, not {args.protocol}")
    reference_dir = getattr(args, "reference_dir", None)
    if args.out is not None and (len(cells) > 1 or reference_dir):
        sys.exit("dlbench run: --out names one cell's result; for several sizes use --out-dir "
                 "(and --reference-dir)")
    if args.out_dir is not None and (getattr(args, "reference", None) or args.failed_out):
        sys.exit("dlbench run: --reference and --failed-out name one cell's files; with "
                 "--out-dir, give --reference-dir (failed records go to ../failed)")
    if args.beside and (args.out_dir is None or args.device != "cpu" or not scenario.groupable):
        sys.exit("dlbench run: --beside measures groups of a scenario's sizes side by side, "
                 "on the CPU, each recipe's into --out-dir")
    if args.rounds_dir is not None and args.round is None:
        sys.exit("dlbench run: --rounds-dir combines the rounds of a last round: give --round")
    measurement = scenario.measurement_settings(
        {**settings.from_args(args), **scenario.settings_from_args(args, cells[0]),
         **({} if args.round is None else {"round": args.round})})
    if cell.WARM_PARENT is None and not args.beside:  # a parent that imported the
        # framework forks the job (side by side: frameworks of their own)
        status = warm.delegate(args.framework, args.scenario, measurement["threads"], argv,
                               process_start)
        if status is not None:
            return status
    if args.out is not None:
        failed = args.failed_out or paths.failed_beside(args.out)
        tasks = [run.Task(cells[0], args.out, failed, scenario.task_inputs(args, cells[0]))]
    else:
        failed_dir = paths.failed_dir_beside(args.out_dir)
        tasks = [run.Task(cell, args.out_dir / f"{cell.id}.json", failed_dir / f"{cell.id}.json",
                          scenario.task_inputs(args, cell)) for cell in cells]
    return run.run(tasks, measurement, process_start, args.rounds_dir)


def _check(path: Path) -> int:
    """Validate a config before a long run: every problem at once, then what would run."""
    from collections import Counter

    from dlbench.plan import config
    from dlbench.plan.matrix import expand_cells

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
    from dlbench.catalogue.models import MODELS
    from dlbench.catalogue.models.vision import MODELS as CNNS
    from dlbench.catalogue.optimizers import OPTIMIZERS
    from dlbench.data.pipeline import __doc__ as pipelines
    from dlbench.scenarios.training import DATASETS

    print("scenarios:")
    for scenario in scenarios.scenarios().values():
        print(f"  {scenario.name:26} {scenario.description}")
    print("models (inference):")
    for spec in MODELS.values():
        longest = spec.max_positions or "unbounded"
        print(f"  {spec.name:26} {spec.description} (max {longest} positions)")
    print("models (training):")
    for cnn in CNNS.values():
        print(f"  {cnn.name:26} {cnn.description}")
    print("precisions:")
    for precision in PRECISIONS.values():
        print(f"  {precision.name:26} {' '.join(precision.description.split())}")
    _list_optimizations()
    print(f"data sets (training): {', '.join(DATASETS)}")
    print(f"optimizers (training): {', '.join(OPTIMIZERS)}")
    print("pipelines (training):" + pipelines.split(":", 1)[1].rstrip())
    print(f"frameworks: {', '.join(FRAMEWORKS)}\ndevices: {', '.join(DEVICES)}")
    return 0


def _list_optimizations() -> None:
    """Each scope's optimizations, with the frameworks that have them (one line per
    framework where they describe a name differently)."""
    from dlbench.catalogue import recipes

    for scope in recipes.scopes():
        print(f"optimizations ({', '.join(scope.scenarios)}):")
        scenario = scope.scenarios[0]
        for name, known in recipes.optimizations(scenario).items():
            described: dict[str, list[str]] = {}
            for framework in sorted(known.frameworks):
                description = recipes.optimization(scenario, name, framework).description
                described.setdefault(description, []).append(framework)
            for description, frameworks in described.items():
                print(f"  {name:26} {description} [{', '.join(frameworks)}]")


def main(argv: list[str] | None = None, process_start: float | None = None) -> int:
    """process_start: when the command started (a job forked by a warm parent: when its
    client did); by default this process's start."""
    process_start = process_start or _process_start()
    argv = sys.argv[1:] if argv is None else argv
    args = parse_args(argv)
    try:
        return _command(args, argv, process_start)
    except atomic.DiskFull as exc:  # the message says it all: no traceback
        print(f"dlbench {args.command}: {exc}", file=sys.stderr)
        return 1


def _command(args: argparse.Namespace, argv: list[str], process_start: float) -> int:
    if args.command == "run":
        return _run(args, argv, process_start)
    if args.command == "aggregate":
        from dlbench.records.aggregate import aggregate

        try:
            aggregate(args.results, args.parquet, args.csv, args.mix_foreign)
        except result.ResultError as exc:
            print(f"dlbench aggregate: {exc}", file=sys.stderr)
            return 1
        if args.provenance:
            import json

            from dlbench.records import provenance

            provenance.write(args.provenance, json.loads(args.config), args.configfiles)
        return 0
    if args.command == "check":
        return _check(args.config)
    if args.command == "compare":
        from dlbench.report import compare

        outputs = dict(csv=args.csv, html=args.html, notebook=args.notebook or compare.NOTEBOOK,
                       executed=args.executed)
        if args.floor is not None:
            outputs["floor"] = args.floor
        if args.interleave:
            if args.rounds < 2:
                sys.exit("dlbench compare: --rounds must be 2 or more (one round pairs "
                         "nothing)")
            return compare.run_interleaved(args.baseline, args.new, args.work_dir,
                                           args.rounds, args.configfile, **outputs)
        return compare.run(args.baseline, args.new, **outputs)
    if args.command == "peak":
        from dlbench.run import peak

        print(peak.describe(peak.write(args.device, args.precision, args.threads, args.out,
                                       args.seconds, args.size, args.library,
                                       args.libraries, args.combine, args.attempts,
                                       args.quiet_wait_s)))
        return 0
    if args.command == "report":
        from dlbench.report import render

        render(args.notebook, args.summary, args.executed, args.out, args.peaks)
        return 0
    return _list()


def _process_start() -> float:
    """When this process started (wall clock), so start-up cost includes the interpreter.
    From its age since boot in clock ticks (/proc/self/stat) against the boot-time clock:
    psutil's create_time adds those ticks to the boot time in whole seconds, up to a second
    off (measured: 0.75 s on this machine, on every start-up figure)."""
    try:
        with open("/proc/self/stat") as f:
            ticks = int(f.read().rpartition(")")[2].split()[19])
        age = time.clock_gettime(time.CLOCK_BOOTTIME) - ticks / os.sysconf("SC_CLK_TCK")
        return time.time() - age
    except (OSError, ValueError, IndexError, AttributeError):
        return time.time()


if __name__ == "__main__":
    sys.exit(main())
