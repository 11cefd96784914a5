"""Overhead of dlbench itself.

    .venv/bin/python bench/overhead.py [--skip-matrix] [--skip-sampling] [--rounds N]

1. The supervisor's 100 Hz sampling: the same cell with sampling on and off, alternating;
   the ratio of their medians (target: under 2% of the cell's latency).
2. The default matrix (config/config.yaml) through the real snakemake in a scratch
   directory, both ways (measurement.process per_cell and per_group): wall time, the sum
   of the timed loops, and their ratio; the per-cell fixed cost per framework (process or
   cell start to first timed iteration, without the cold first call, where compilation
   and tracing land); and how far the two ways' medians are apart, cell by cell.
"""

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd
from cells import REPO, label, run_cell

SAMPLING_CELLS = [("pytorch", "distilbert-base-uncased", 1, 64, "eager"),
                  ("tensorflow", "distilbert-base-uncased", 1, 64, "graph")]


def sampling_overhead(rounds: int) -> None:
    for cell in SAMPLING_CELLS:
        medians = {100: [], 0: []}
        for round_ in range(rounds):
            for hz in sorted(medians, reverse=round_ % 2 == 1):  # alternate which goes first
                record = run_cell(*cell, f"--sample-hz={hz}", "--min-duration-s=2")
                medians[hz].append(record["timing"]["median_ms"])
        on, off = statistics.median(medians[100]), statistics.median(medians[0])
        ratios = [a / b for a, b in zip(medians[100], medians[0], strict=True)]
        print(f"sampling at 100 Hz, {label(*cell)}, {rounds} processes each way:")
        print(f"  median with sampling {on:.2f} ms, without {off:.2f} ms, ratio {on / off:.3f}"
              f" (round by round: median {statistics.median(ratios):.3f}, "
              f"{min(ratios):.3f}–{max(ratios):.3f})")


def default_matrix(process: str) -> pd.DataFrame:
    workdir = Path(tempfile.mkdtemp(prefix=f"dlbench-overhead-{process}-"))
    started = time.monotonic()
    subprocess.run(
        [str(Path(sys.executable).with_name("snakemake")), "--snakefile",
         str(REPO / "Snakefile"), "--directory", str(workdir), "--configfile",
         str(REPO / "config/config.yaml"), "--workflow-profile",
         str(REPO / "workflow/profiles/default"), "--cores", "2",
         "--config", f"measurement={{process: {process}}}"],
        check=True, capture_output=True,
    )
    wall = time.monotonic() - started
    summary = pd.read_parquet(workdir / "results/summary.parquet")
    ok = summary[summary["status"] == "ok"]
    loops = ok["loop_s"].sum()
    print(f"default matrix ({len(summary)} cells, {len(ok)} measured), process: {process}:")
    print(f"  wall time {wall:.0f} s, timed loops {loops:.0f} s, ratio {wall / loops:.1f}")
    print("  fixed cost, process (or cell) start to first timed iteration without the cold "
          "call (median s):")
    first = ok["process_position"].fillna(0) == 0
    fixed = ok["first_timed_iteration_s"] - ok["cold_start_s"]
    for framework in sorted(ok["framework"].unique()):
        mine = ok["framework"] == framework
        line = (f"    {framework:10} first cell of a process {fixed[mine & first].median():5.2f}"
                f" (imports done {ok[mine & first]['imports_done_s'].median():.2f})")
        if (mine & ~first).any():
            line += f", later cells {fixed[mine & ~first].median():.2f}"
        print(line)
    print(f"  results in {workdir}")
    return summary.set_index("cell_id")


def ratios(a: pd.DataFrame, b: pd.DataFrame) -> pd.Series:
    """Cell by cell, b's median latency over a's, where both timed the cell."""
    both = a["status"].eq("ok") & b["status"].reindex(a.index).eq("ok")
    return b.loc[both[both].index, "median_ms"] / a.loc[both, "median_ms"]


def describe(ratio: pd.Series) -> str:
    return (f"median {ratio.median():.3f}, middle half {ratio.quantile(0.25):.3f} to "
            f"{ratio.quantile(0.75):.3f}, range {ratio.min():.3f} to {ratio.max():.3f} "
            f"({len(ratio)} cells)")


def agreement(runs: dict[str, list[pd.DataFrame]]) -> None:
    """per_group against per_cell, next to per_cell against itself (the run-to-run noise)."""
    cell, group = runs["per_cell"], runs["per_group"]
    for i, (a, b) in enumerate(zip(cell, group, strict=True), 1):
        print(f"round {i}, per_group / per_cell medians: {describe(ratios(a, b))}")
    for i, (a, b) in enumerate(zip(cell, cell[1:], strict=False), 1):
        print(f"noise: per_cell round {i + 1} / round {i}: {describe(ratios(a, b))}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--skip-matrix", action="store_true")
    parser.add_argument("--skip-sampling", action="store_true")
    parser.add_argument("--rounds", type=int, default=8,
                        help="processes each way for the sampling overhead")
    parser.add_argument("--matrix-rounds", type=int, default=2,
                        help="default-matrix runs each way, alternating")
    args = parser.parse_args()
    if not args.skip_sampling:
        sampling_overhead(args.rounds)
    if not args.skip_matrix:
        runs = {"per_cell": [], "per_group": []}
        for _ in range(args.matrix_rounds):
            for process, summaries in runs.items():
                summaries.append(default_matrix(process))
        agreement(runs)


if __name__ == "__main__":
    main()
