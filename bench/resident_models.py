"""How much memory the default's recipes take resident side by side: what measuring them
side by side, taking turns (bench/live_pairs.py), would hold at once (issue 38).

Each recipe's process is built and warmed up as bench/live_pairs.py builds a side (BERT
base, one size), one after another; with all of them resident, each one's resident set
(VmRSS: the shared libraries counted in every process) and their sum.

    .venv/bin/python bench/resident_models.py [--batch 2] [--seqlen 64] [--threads 2]
        [--recipes pytorch:eager tensorflow:graph …]
"""

import argparse
import sys

import psutil
from live_pairs import SRC, start

sys.path.insert(0, str(SRC))
from dlbench.plan import config  # noqa: E402  (after the path to this checkout's dlbench)


def default_recipes() -> list[str]:
    """config/config.yaml's inference recipes, as framework:optimization."""
    settings = config.load_file(SRC.parent / "config" / "config.yaml")
    return [f"{framework}:{optimization}"
            for framework, optimizations in settings["inference"]["optimizations"].items()
            for optimization in optimizations]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=2)
    parser.add_argument("--seqlen", type=int, default=64)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--recipes", nargs="+", help="default: config/config.yaml's")
    args = parser.parse_args()
    processes = []
    try:
        for recipe in args.recipes or default_recipes():
            process = start(recipe, args)
            processes.append((recipe, process))
            if process.stdout.readline().strip() != "READY":
                sys.exit(f"{recipe}: its process failed")
        total = 0.0
        for recipe, process in processes:
            size = psutil.Process(process.pid).memory_info().rss / 2**20
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
