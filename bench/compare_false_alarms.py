"""False alarms of `dlbench compare`: how often it calls two runs of identical code
significantly different.

    PYTHONPATH=src .venv/bin/python bench/compare_false_alarms.py measure DIR --pairs 20
        [--model distilbert-base-uncased --seqlen 32]
    PYTHONPATH=src .venv/bin/python bench/compare_false_alarms.py count DIR

`measure` runs one cell (PyTorch, batch 1, eager, the workflow's default measurement
settings; tiny-bert at 16 tokens unless --model and --seqlen say otherwise: `count` reads
the cell from the runs) 2 × PAIRS times, each a fresh `dlbench run`, one
after the other: a stream of runs of identical code, kept under DIR (pair i is runs 2i and
2i + 1). `count` groups that stream three ways and feeds every group to `dlbench compare`
(the CLI of the dlbench on PYTHONPATH, so that two versions count the same runs):

- one process a side: each pair of consecutive runs, as two runs made one after the other;
- k processes a side (`--repeats k`, one after the other): 2k consecutive runs, the first
  k against the last k, each side combined as the scenario combines repeats (the k
  processes come from k `dlbench run` calls, not one with `--repeats k`: the same cell in
  fresh processes, back to back, but each under its own supervisor);
- interleaved, k rounds: the same 2k runs taken A B B A A B …, each side marked as one
  side of an interleaved run (as `dlbench compare --interleave` writes them).

It prints each comparison's change, p and verdict, and the share called a regression or an
improvement: every run is identical code, so each such verdict is a false alarm. With few
comparisons read the count with its bound (0 of 20 still allows up to 14%).

`count --plant 0.05 0.10 0.25` then plants slowdowns: every sample of the new side's runs
made that much slower (the real runs' noise, a known change), and prints the share of
comparisons that call it a regression — the detection rate of each planted slowdown.
"""

import argparse
import csv
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench"))
from cells import label  # noqa: E402

FRAMEWORK, BATCH, OPTIMIZATION = "pytorch", 1, "eager"
SIGNIFICANT = ("regression", "improvement")


def measurement_args() -> list[str]:
    """The workflow's default measurement settings as `dlbench run` options."""
    from dlbench.plan import settings

    return settings.to_args(settings.defaults())


def run_once(out: Path, model: str, seqlen: int) -> None:
    subprocess.run([sys.executable, "-m", "dlbench", "run", f"--framework={FRAMEWORK}",
                    f"--model={model}", "--device=cpu", f"--batch={BATCH}",
                    f"--seqlen={seqlen}", f"--optimization={OPTIMIZATION}",
                    *measurement_args(), f"--out={out / 'runs' / 'cell.json'}"],
                   check=True, capture_output=True, text=True)


def measure(folder: Path, pairs: int, model: str, seqlen: int) -> None:
    start = len(list(folder.glob("r1_pair*")))
    for i in range(start, start + pairs):
        pair = folder / f"r1_pair{i:03d}"
        for side in ("a", "b"):
            run_once(pair / side, model, seqlen)
        print(f"measured {pair.name}", flush=True)


def stream(folder: Path) -> list[Path]:
    """The measured runs' result files, in the order they ran."""
    files = [pair / side / "runs" / "cell.json" for pair in sorted(folder.glob("r1_pair*"))
             for side in ("a", "b")]
    return [f for f in files if f.is_file()]


def slowed(record: dict, factor: float) -> dict:
    """The record with every timed sample `factor` times as long (its statistics anew)."""
    from dlbench.measure.stats import summarize

    timing = record["timing"]
    samples = [x * factor for x in timing["samples_ms"]]
    timing.update(summarize(samples), samples_ms=samples)
    return record


def side_folder(files: list[Path], folder: Path, marker: dict | None = None,
                factor: float = 1.0) -> Path:
    """One result set of these runs: their records combined as repeats (in this order),
    each made `factor` times as slow."""
    from dlbench.files import atomic
    from dlbench.plan.matrix import Cell
    from dlbench.records import result

    records = [slowed(result.read(f), factor) for f in files]
    record = records[0] if len(records) == 1 else \
        Cell.from_params(records[0]["params"]).spec.combine(records)
    (folder / "runs").mkdir(parents=True)
    atomic.write_json_atomic(folder / "runs" / "cell.json", record)
    if marker is not None:
        atomic.write_json_atomic(folder / "interleave.json", marker)
    return folder


def compare_pair(a: Path, b: Path) -> dict:
    """The compared cell's row of `dlbench compare`'s CSV."""
    with tempfile.TemporaryDirectory() as tmp:
        table = Path(tmp) / "compare.csv"
        done = subprocess.run([sys.executable, "-m", "dlbench", "compare", str(a), str(b),
                               "--csv", str(table)], capture_output=True, text=True)
        if done.returncode != 0:
            raise RuntimeError(done.stderr[-2000:])
        rows = [r for r in csv.DictReader(table.open()) if r["baseline_status"] == "ok"]
    return rows[0]


def groups(files: list[Path], k: int, interleaved: bool) -> list[tuple[list, list]]:
    """Consecutive windows of 2k runs as (baseline, new): the first k against the last k,
    or interleaved A B B A A B …"""
    windows = [files[i:i + 2 * k] for i in range(0, len(files) - 2 * k + 1, 2 * k)]
    if not interleaved:
        return [(w[:k], w[k:]) for w in windows]
    # Round r runs A then B when r is even, B then A when it is odd.
    a_first = [r % 2 == 0 for r in range(k)]
    return [([w[2 * r + (not first)] for r, first in enumerate(a_first)],
             [w[2 * r + first] for r, first in enumerate(a_first)]) for w in windows]


def report(title: str, rows: list[tuple[str, dict]], planted: float = 0.0) -> None:
    from scipy.stats import beta

    print(f"\n{title}, {len(rows)} comparisons:")
    print(f"{'group':10} {'baseline ms':>11} {'new ms':>8} {'change':>8} {'p':>8}  test / verdict")
    for name, row in rows:
        change = float(row["ratio"]) - 1
        p = f"{float(row['p_value']):.2g}" if row.get("p_value") else ""
        print(f"{name:10} {float(row['baseline_ms']):11.3f} {float(row['new_ms']):8.3f} "
              f"{change:+8.1%} {p:>8}  {row.get('test', '')} / {row['verdict']}")
    if planted:
        found, n = sum(row["verdict"] == "regression" for _, row in rows), len(rows)
        low, high = (0.0 if found == 0 else float(beta.ppf(0.025, found, n - found + 1)),
                     1.0 if found == n else float(beta.ppf(0.975, found + 1, n - found)))
        print(f"planted {planted:.0%} slower: called a regression in {found} of {n} "
              f"({found / n:.0%}; 95% interval {low:.0%}-{high:.0%})", flush=True)
        return
    alarms, n = sum(row["verdict"] in SIGNIFICANT for _, row in rows), len(rows)
    # The exact (Clopper-Pearson) one-sided 95% upper bound of the rate.
    upper = 1.0 if alarms == n else float(beta.ppf(0.95, alarms + 1, n - alarms))
    print(f"false alarms: {alarms} of {n} ({alarms / n:.0%}; 95% upper bound {upper:.0%})",
          flush=True)


def compared(a: list[Path], b: list[Path], marker: dict | None, planted: float) -> dict:
    """One comparison: the baseline's runs against the new side's, made `planted` slower."""
    with tempfile.TemporaryDirectory() as tmp:
        sides = [side_folder(runs, Path(tmp) / name, marker and {**marker, "side": name},
                             factor)
                 for name, runs, factor in (("baseline", a, 1.0), ("new", b, 1.0 + planted))]
        return compare_pair(*sides)


def count(folder: Path, processes: list[int], plants: list[float], jobs: int) -> None:
    from dlbench.records import result

    files = stream(folder)
    params = result.read(files[0])["params"]
    cell = label(FRAMEWORK, params["model"], BATCH, params["seqlen"], OPTIMIZATION)
    print(f"{cell}: {len(files)} runs of identical code, one after the other")
    for planted in plants:
        for k in processes:
            for interleaved in ([False] if k == 1 else [False, True]):
                with ThreadPoolExecutor(jobs) as pool:  # each comparison a process
                    found = [pool.submit(compared, a, b, {"run": f"bench{k}_{i}", "rounds": k}
                                         if interleaved else None, planted)
                             for i, (a, b) in enumerate(groups(files, k, interleaved))]
                    rows = [(f"{i:03d}", each.result()) for i, each in enumerate(found)]
                how = ("interleaved rounds" if interleaved
                       else "processes a side, one after the other")
                report(f"{k} {how}", rows, planted)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("action", choices=["measure", "count"])
    parser.add_argument("folder", type=Path)
    parser.add_argument("--pairs", type=int, default=20)
    parser.add_argument("--model", default="tiny-bert", help="measure: the cell's model")
    parser.add_argument("--seqlen", type=int, default=16, help="measure: its length")
    parser.add_argument("--processes", type=int, nargs="+", default=[1, 2, 4],
                        help="count: the processes (or rounds) a side of each grouping")
    parser.add_argument("--plant", type=float, nargs="+", default=[0.0],
                        help="count: slowdowns planted in the new side (0: none, the "
                             "false alarms; 0.05: 5%% slower)")
    parser.add_argument("--jobs", type=int, default=2,
                        help="count: comparisons run at once (after measuring: the machine "
                             "is free)")
    args = parser.parse_args()
    if args.action == "measure":
        measure(args.folder, args.pairs, args.model, args.seqlen)
    count(args.folder, args.processes, args.plant, args.jobs)


if __name__ == "__main__":
    main()
