"""Where the spread between fresh processes of one cell comes from (issue 38): the same cell
measured in many fresh processes, several ways taking turns (A B C …, C B A …: the
machine's drift falls on every way alike), each way changing one likely cause.

    .venv/bin/python bench/spread.py [--processes 10] [--loop-s 3] [--ways baseline ...]
        [--framework pytorch] [--optimization eager]

Per way: the median of its processes' medians, the spread of their logs (the standard
deviation, raw), the same with the machine's drift taken out (each turn's level, from all
the ways measured in it: the residuals of a median polish, as dlbench.analysis.rounds
does), and the median IQR within a process (with two ways the drift-out figures are equal by
construction: compare three or more). The ways:

- baseline: `dlbench run` as the workflow runs a cell (its default settings);
- no-sampling: the supervisor does not sample the cell (--sample-hz 0);
- long-warmup: 20 warm-up calls instead of 2 (the first seconds of a process: page faults,
  the clock ramping up, caches);
- pinned: OpenMP's threads bound to cores (OMP_PROC_BIND=true, OMP_PLACES=cores);
- one-arena: glibc's allocator with one arena (MALLOC_ARENA_MAX=1: memory placement);
- huge-pages: large allocations on transparent huge pages where the kernel leaves it to
  the process (`madvise`): PyTorch's CPU allocator (THP_MEM_ALLOC_ENABLE=1) and glibc's
  malloc (GLIBC_TUNABLES=glibc.malloc.hugetlb=1) ask for them (fewer page faults and TLB
  misses; where THP is `always` or `never` this changes little);
- no-aslr: the process's addresses not randomized (`setarch -R`): every process lays out
  its memory alike, so that a spread from where its buffers land in the caches narrows;
- one-thread: the cell on one thread (--threads=1): whether the spread is in each core or
  in splitting each operation across both (bench/thread_noise.py times that on a product);
- no-onednn: TensorFlow without its oneDNN kernels (TF_ENABLE_ONEDNN_OPTS=0; TensorFlow only).

Run it on an idle machine; it reports, it does not decide.
"""

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
from dlbench.analysis.rounds import _polish  # noqa: E402

CELL = ["--model=bert-base-uncased", "--device=cpu", "--batch=1", "--seqlen=16"]
# Per way: its `dlbench run` options, its environment, the command it runs under.
WAYS = {
    "baseline": ([], {}, []),
    "no-sampling": (["--sample-hz=0"], {}, []),
    "long-warmup": (["--warmup-iterations=20"], {}, []),
    "pinned": ([], {"OMP_PROC_BIND": "true", "OMP_PLACES": "cores"}, []),
    "one-arena": ([], {"MALLOC_ARENA_MAX": "1"}, []),
    "huge-pages": ([], {"THP_MEM_ALLOC_ENABLE": "1",
                        "GLIBC_TUNABLES": "glibc.malloc.hugetlb=1"}, []),
    "no-aslr": ([], {}, ["setarch", os.uname().machine, "-R"]),
    "one-thread": (["--threads=1"], {}, []),
    "no-onednn": ([], {"TF_ENABLE_ONEDNN_OPTS": "0"}, []),
}


def measure(way: str, loop_s: float, cell: list[str]) -> dict:
    args, env, under = WAYS[way]
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "runs" / "cell.json"
        subprocess.run([*under, sys.executable, "-m", "dlbench", "run", *cell,
                        f"--min-duration-s={loop_s}", "--min-iterations=6", "--target-ci=0",
                        *args, f"--out={out}"], check=True, capture_output=True,
                       env={**os.environ, **env})
        return json.loads(out.read_text())["timing"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--processes", type=int, default=10)
    parser.add_argument("--loop-s", type=float, default=3.0)
    parser.add_argument("--ways", nargs="+", choices=list(WAYS), default=list(WAYS))
    parser.add_argument("--framework", default="pytorch")
    parser.add_argument("--optimization", default="eager")
    args = parser.parse_args()
    cell = [*CELL, f"--framework={args.framework}", f"--optimization={args.optimization}"]
    medians = {way: [] for way in args.ways}
    iqrs = {way: [] for way in args.ways}
    for turn in range(args.processes):
        for way in args.ways if turn % 2 == 0 else args.ways[::-1]:
            timing = measure(way, args.loop_s, cell)
            medians[way].append(timing["median_ms"])
            iqrs[way].append(timing["relative_iqr"])
    logs = np.log(np.array([medians[way] for way in args.ways]))
    residuals, drift = _polish(logs)
    print(f"{' '.join(cell)}: {args.processes} processes a way, {args.loop_s:g}-s loops; "
          f"the machine's drift between turns: {np.expm1(drift.min()):+.1%} to "
          f"{np.expm1(drift.max()):+.1%}")
    print(f"{'way':14}{'median ms':>10}{'sd(log)':>9}{'drift out':>10}{'IQR within':>11}")
    for row, way in enumerate(args.ways):
        raw = statistics.stdev(logs[row])
        corrected = math.sqrt(float((residuals[row] ** 2).sum()) / (args.processes - 1))
        print(f"{way:14}{statistics.median(medians[way]):>10.2f}{raw:>9.3f}"
              f"{corrected:>10.3f}{statistics.median(iqrs[way]):>11.3f}")
    for way in args.ways:  # a cell whose processes run at one of two speeds shows here
        print(f"{way}: " + " ".join(f"{m:.1f}" for m in medians[way]))
    if len(args.ways) == 2:  # each turn's level is then the two ways' midpoint
        print("(two ways: their residuals are equal and opposite, so 'drift out' cannot tell "
              "them apart; compare sd(log), or add a third way)")


if __name__ == "__main__":
    main()
