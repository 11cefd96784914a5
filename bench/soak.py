"""Soak: the tiny matrix run back to back, one planted fault per run; nothing may be lost.

    .venv/bin/python bench/soak.py [--runs 5]

Each run re-measures every cell (--forceall) with DLBENCH_TEST_FAULT set for one cell;
afterwards every cell of the matrix must have a row in the summary, the planted cell
must show the fault's status and reason, and every other cell must be as before.
"""

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd
import yaml

REPO = Path(__file__).resolve().parents[1]
CONFIG = {
    "frameworks": ["pytorch", "tensorflow"],
    "models": ["tiny-bert", "tiny-gpt2"],
    "devices": ["cpu", "gpu"],
    "batch_sizes": [1, 2],
    "sequence_lengths": [8, 128],
    "optimizations": ["eager", "graph"],
    "measurement": {"warmup_iterations": 1, "min_duration_s": 0.05, "min_iterations": 3,
                    "target_ci": 0, "timeout_s": 30, "max_host_memory_gib": 3},
}
# (fault, the cell it is planted in, the status that cell must show)
PLAN = [
    ("raise", "pytorch_tiny-bert_cpu_b1_s8_eager", "error"),
    ("crash", "tensorflow_tiny-gpt2_cpu_b2_s8_graph", "error"),
    ("hang", "tensorflow_tiny-bert_cpu_b2_s8_eager", "error"),
    ("oom", "pytorch_tiny-gpt2_cpu_b1_s8_eager", "oom"),
    ("kill", "tensorflow_tiny-bert_cpu_b1_s8_graph", "error"),
]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=len(PLAN))
    runs = parser.parse_args().runs
    workdir = Path(tempfile.mkdtemp(prefix="dlbench-soak-"))
    (workdir / "config.yaml").write_text(yaml.safe_dump(CONFIG))
    snakemake = Path(sys.executable).with_name("snakemake")
    lost_total = 0
    print(f"workdir {workdir}")
    print(f"{'run':>3} {'fault':6} {'exit':>4} {'wall s':>6} {'rows':>4} {'lost':>4}  "
          "planted cell: status (reason)")
    for run in range(runs):
        fault, cell, expected = PLAN[run % len(PLAN)]
        env = dict(os.environ, DLBENCH_TEST_FAULT=f"{fault}@{cell}")
        started = time.monotonic()
        done = subprocess.run(
            [str(snakemake), "--snakefile", str(REPO / "Snakefile"), "--directory",
             str(workdir), "--configfile", str(workdir / "config.yaml"), "--workflow-profile",
             str(REPO / "workflow/profiles/default"), "--cores", "2", "--forceall"],
            env=env, capture_output=True, text=True,
        )
        wall = time.monotonic() - started
        summary = pd.read_parquet(workdir / "results/summary.parquet").set_index("cell_id")
        expected_cells = _cell_ids()
        lost = len(expected_cells - set(summary.index))
        lost_total += lost
        row = summary.loc[cell]
        status_ok = row["status"] == expected
        others = summary.drop(index=cell)
        others_ok = set(others["status"]) <= {"ok", "unsupported"}
        print(f"{run + 1:>3} {fault:6} {done.returncode:>4} {wall:>6.1f} {len(summary):>4} "
              f"{lost:>4}  {row['status']} ({row['reason']})"
              + ("" if status_ok and others_ok else "   <-- UNEXPECTED"))
        if not (status_ok and others_ok):
            lost_total += 1
    print(f"cells lost over {runs} runs: {lost_total}")
    return 1 if lost_total else 0


def _cell_ids() -> set[str]:
    sys.path.insert(0, str(REPO / "src"))
    from dlbench.plan import config
    from dlbench.plan.matrix import expand_cells

    return {c.id for c in expand_cells(config.validate(CONFIG))}


if __name__ == "__main__":
    sys.exit(main())
