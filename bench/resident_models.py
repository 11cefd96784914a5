"""How much memory the default's recipes take resident side by side: what measuring them
side by side, taking turns (bench/live_pairs.py), would hold at once (issue 38).

Each recipe's process is built and warmed up as bench/live_pairs.py builds a side (BERT
base, one size), one after another; with all of them resident, each one's resident set
(VmRSS: the shared libraries counted in every process) and their sum.

    .venv/bin/python bench/resident_models.py [--batch 2] [--seqlen 64] [--threads 2]
        [--recipes pytorch:eager tensorflow:graph …]
"""

import argparse
import subprocess
import sys
from pathlib import Path

LIVE_PAIRS = Path(__file__).resolve().with_name("live_pairs.py")
DEFAULT = ["pytorch:eager", "pytorch:torchscript", "pytorch:onednn", "tensorflow:eager",
           "tensorflow:graph", "jax:eager", "jax:jit"]  # config/config.yaml's inference


def resident_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmRSS")) / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=2)
    parser.add_argument("--seqlen", type=int, default=64)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--recipes", nargs="+", default=DEFAULT)
    args = parser.parse_args()
    processes = []
    try:
        for recipe in args.recipes:
            framework, optimization = recipe.split(":")
            process = subprocess.Popen(
                [sys.executable, str(LIVE_PAIRS), "--child", framework, optimization,
                 str(args.batch), str(args.seqlen), str(args.threads)],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                text=True)
            processes.append((recipe, process))
            if process.stdout.readline().strip() != "READY":
                sys.exit(f"{recipe}: its process failed")
        total = 0.0
        for recipe, process in processes:
            size = resident_mb(process.pid)
            total += size
            print(f"{recipe:22s} {size:7.0f} MB")
        print(f"{len(processes)} resident, BERT base b{args.batch} s{args.seqlen} warmed up: "
              f"{total:.0f} MB in all")
    finally:
        for _, process in processes:
            process.stdin.close()
            process.wait()


if __name__ == "__main__":
    main()
