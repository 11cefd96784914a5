"""Overhead of dlbench itself.

    .venv/bin/python bench/overhead.py [--skip-matrix] [--skip-sampling] [--rounds N]
        [--matrix default|slice] [--matrix-rounds N]

1. The supervisor's 100 Hz sampling: the same cell with sampling on and off, alternating;
   the ratio of their medians (target: under 2% of the cell's latency).
2. A matrix through the real snakemake in a scratch directory: its wall time, the time its
   cells spent in timed loops and that share (dlbench.records.measuring, what every run
   prints at its end), per scenario; the per-cell fixed cost per framework (process or
   cell start to first timed iteration, without the cold first call, where compilation
   and tracing land); the wall by the workflow's rules (where the rest goes).
   `default`: config/config.yaml as it is (the README's main job); `slice`: a per_group
   slice of the 2019 preset (config/presets/hf2019.yaml: BERT base, batch 1 and 2,
   lengths 8 to 128, PyTorch eager and TorchScript, TensorFlow graph, in one round), the
   shape of a large matrix. Targets (issue 38): 60% for the default, 85% for the slice.
"""

import argparse
import glob
import re
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

import pandas as pd
from cells import REPO, label, run_cell

from dlbench.records import measuring

SAMPLING_CELLS = [("pytorch", "distilbert-base-uncased", 1, 64, "eager"),
                  ("tensorflow", "distilbert-base-uncased", 1, 64, "graph")]
MATRICES = {
    "default": ["--configfile", str(REPO / "config/config.yaml")],
    "slice": ["--configfile", str(REPO / "config/presets/hf2019.yaml"), "--config",
              "models=[bert-base-uncased]", "batch_sizes=[1,2]",
              "sequence_lengths=[8,64,128]", "devices=[cpu]",
              "frameworks=[pytorch,tensorflow]",
              "optimizations=[eager,torchscript,graph]"],
}


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


def matrix(name: str) -> pd.DataFrame:
    """Run a matrix (MATRICES) in a fresh scratch folder; print its wall time and share
    measuring; its summary."""
    workdir = Path(tempfile.mkdtemp(prefix=f"dlbench-overhead-{name}-"))
    started = time.time()
    subprocess.run(
        [str(Path(sys.executable).with_name("snakemake")), "--snakefile",
         str(REPO / "Snakefile"), "--directory", str(workdir), "--workflow-profile",
         str(REPO / "workflow/profiles/default"), "--cores", "2", *MATRICES[name]],
        check=True, capture_output=True)
    found = measuring.share(glob.glob(str(workdir / "results/runs/*.json")), started,
                            time.time())
    print(f"{name}: {measuring.describe(found).removeprefix('dlbench: ')}")
    summary = pd.read_parquet(workdir / "results/summary.parquet")
    ok = summary[summary["status"] == "ok"]
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
    print("  the wall by the workflow's rules (jobs, their wall time in s; Snakemake's log):")
    for rule, (jobs, seconds) in sorted(rule_walls(workdir).items(), key=lambda r: -r[1][1]):
        loops = found["by_scenario"].get(rule.removeprefix("measuring "), {}).get("measuring_s")
        share = f", {loops:.0f} s of it in timed loops ({loops / seconds:.0%})" \
            if loops and seconds else ""
        print(f"    {rule:22} {jobs:3} jobs {seconds:6.0f} s{share}")
    print(f"  results in {workdir}")
    return summary


def rule_walls(workdir: Path) -> dict[str, tuple[int, float]]:
    """Per rule of a finished run (its measuring jobs per scenario, all rounds together):
    its jobs and their summed wall time, from the start and finish stamps of Snakemake's
    log (to the second; jobs that overlapped count each)."""
    from dlbench.scenarios import registry

    scenarios = registry.scenarios()
    stamp = re.compile(r"\[(\w{3} \w{3} +\d+ [\d:]+ \d{4})\]$")
    started, jobs, now, job = {}, {}, None, None
    log = max((workdir / ".snakemake" / "log").glob("*.snakemake.log"))
    for line in log.read_text().splitlines():
        if match := stamp.match(line.strip()):
            now = datetime.strptime(match.group(1), "%a %b %d %H:%M:%S %Y")
        elif match := re.match(r"\s*(?:local)?rule (\w+):", line):
            job = {"rule": match.group(1), "start": now}
        elif job and (match := re.match(r"\s*jobid: (\d+)", line)):
            started[match.group(1)] = job
        elif job and job["rule"].startswith("measure") and \
                (match := re.match(r"\s*wildcards: .*(?:cell|head)=(\w+)", line)):
            first = match.group(1).split("_")[0]  # a cell id starts with its scenario's
            job["rule"] = f"measuring {first if first in scenarios else 'inference'}"
        elif (match := re.match(r"Finished jobid: (\d+)", line)) and match.group(1) in started:
            done = started.pop(match.group(1))
            count, seconds = jobs.get(done["rule"], (0, 0.0))
            jobs[done["rule"]] = (count + 1, seconds + (now - done["start"]).total_seconds())
    return jobs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--skip-matrix", action="store_true")
    parser.add_argument("--skip-sampling", action="store_true")
    parser.add_argument("--rounds", type=int, default=8,
                        help="processes each way for the sampling overhead")
    parser.add_argument("--matrix", choices=list(MATRICES), action="append",
                        help="the matrices to run (default: both)")
    parser.add_argument("--matrix-rounds", type=int, default=1,
                        help="runs of each matrix, one after the other")
    args = parser.parse_args()
    if not args.skip_sampling:
        sampling_overhead(args.rounds)
    if not args.skip_matrix:
        for _ in range(args.matrix_rounds):
            for name in args.matrix or list(MATRICES):
                matrix(name)


if __name__ == "__main__":
    main()
