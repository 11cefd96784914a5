"""Two cells measured at the same time on one machine, with and without OpenMP's spinning.

As the two test workers' cells are: each `dlbench run` of tiny-bert, eager, batch 1,
length 8, with as many threads as the machine has cores, a fixed number of timed
iterations; in pairs started together, under OpenMP's default wait policy and under
OMP_WAIT_POLICY=PASSIVE, alternated; and each policy alone once.

    .venv/bin/python bench/overlapping_cells.py [--framework pytorch] [--pairs 3]
                                                [--iterations 300]

Prints each cell's median and each pair's wall and CPU time. On a 2-core AMD EPYC
(2026-11-26), PyTorch's tiny-bert alone: 0.295 ms (default), 1.35 ms (passive); in pairs,
default: 141-144 ms in all 3 pairs (89-94 s of CPU for 2 × 300 iterations; libgomp's
threads spin at every barrier while their partner waits for the core), passive: 0.45-1.26
ms (6 s of CPU). TensorFlow's and JAX's overlapped cells kept their speed.
"""

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("--framework", default="pytorch")
parser.add_argument("--pairs", type=int, default=3)
parser.add_argument("--iterations", type=int, default=300)
args = parser.parse_args()
THREADS = os.cpu_count() or 1


def cell(out: Path, lock_dir: Path, policy: str | None) -> subprocess.Popen:
    env = {key: value for key, value in os.environ.items() if key != "OMP_WAIT_POLICY"}
    if policy:
        env["OMP_WAIT_POLICY"] = policy
    # Each cell its own device lock, as each test worker has: they overlap.
    env["DLBENCH_LOCK_DIR"] = str(lock_dir)
    return subprocess.Popen(
        [sys.executable, "-m", "dlbench", "run", f"--framework={args.framework}",
         "--model=tiny-bert", "--device=cpu", "--batch=1", "--seqlen=8",
         "--optimization=eager", "--warmup-iterations=1", "--min-duration-s=0.01",
         f"--min-iterations={args.iterations}", "--target-ci=0", f"--threads={THREADS}",
         f"--out={out}"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        text=True)


def run(cells: int, policy: str | None, folder: Path) -> str:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    outs = [folder / f"{policy}-{i}.json" for i in range(cells)]
    for process in [cell(out, folder / f"lock{i}", policy) for i, out in enumerate(outs)]:
        _, stderr = process.communicate()
        if process.returncode != 0:
            sys.exit(f"a cell failed (exit {process.returncode}):\n{stderr[-3000:]}")
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    medians = [json.loads(out.read_text())["timing"]["median_ms"] for out in outs]
    return (f"{policy or 'default':8} {'pair' if cells > 1 else 'alone':5} medians "
            + " ".join(f"{m:8.3f}" for m in medians)
            + f" ms   wall {wall:5.1f} s  cpu {cpu:5.1f} s")


with tempfile.TemporaryDirectory() as folder:
    for policy in (None, "PASSIVE"):
        print(run(1, policy, Path(folder)), flush=True)
    for _ in range(args.pairs):
        for policy in (None, "PASSIVE"):
            print(run(2, policy, Path(folder)), flush=True)
