"""Overhead of dlbench itself.

    .venv/bin/python bench/overhead.py [--skip-matrix]

1. The supervisor's 100 Hz sampling: the same cell with sampling on and off, alternating;
   the ratio of their medians (target: under 2% of the cell's latency).
2. The default matrix (config/config.yaml) through the real snakemake in a scratch
   directory: its wall time, the sum of its timed loops, and their ratio; and the per-cell
   fixed cost per framework (process start to first timed iteration, without the cold
   first call, where compilation and tracing land).
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

SAMPLING_CELL = ("pytorch", "distilbert-base-uncased", 1, 64, "eager")


def sampling_overhead(rounds: int = 4) -> None:
    medians = {100: [], 0: []}
    for _ in range(rounds):
        for hz in medians:
            record = run_cell(*SAMPLING_CELL, f"--sample-hz={hz}", "--min-duration-s=2")
            medians[hz].append(record["timing"]["median_ms"])
    on, off = statistics.median(medians[100]), statistics.median(medians[0])
    print(f"sampling at 100 Hz, {label(*SAMPLING_CELL)}, {rounds} processes each way:")
    print(f"  median with sampling {on:.2f} ms, without {off:.2f} ms, ratio {on / off:.3f}")


def default_matrix() -> None:
    workdir = Path(tempfile.mkdtemp(prefix="dlbench-overhead-"))
    started = time.monotonic()
    subprocess.run(
        [str(Path(sys.executable).with_name("snakemake")), "--snakefile",
         str(REPO / "Snakefile"), "--directory", str(workdir), "--configfile",
         str(REPO / "config/config.yaml"), "--workflow-profile",
         str(REPO / "workflow/profiles/default"), "--cores", "2"],
        check=True, capture_output=True,
    )
    wall = time.monotonic() - started
    summary = pd.read_parquet(workdir / "results/summary.parquet")
    ok = summary[summary["status"] == "ok"]
    loops = ok["loop_s"].sum()
    print(f"default matrix ({len(summary)} cells, {len(ok)} measured), one process per cell:")
    print(f"  wall time {wall:.0f} s, timed loops {loops:.0f} s, ratio {wall / loops:.1f}")
    fixed = (ok["first_timed_iteration_s"] - ok["cold_start_s"]).groupby(ok["framework"])
    print("  per-cell fixed cost, process start to first timed iteration without the cold "
          "call (median s):")
    for framework, values in fixed:
        phases = ok[ok["framework"] == framework][["imports_done_s", "model_ready_s"]]
        print(f"    {framework:10} {values.median():5.2f}  (imports done "
              f"{phases['imports_done_s'].median():.2f}, model ready "
              f"{phases['model_ready_s'].median():.2f})")
    print(f"  results in {workdir}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--skip-matrix", action="store_true")
    args = parser.parse_args()
    sampling_overhead()
    if not args.skip_matrix:
        default_matrix()


if __name__ == "__main__":
    main()
