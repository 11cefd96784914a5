"""Jobs forked by a warm parent (src/dlbench/warm.py) against jobs that import for
themselves: what each `dlbench run` costs, and whether the cells measure alike.

    .venv/bin/python bench/warm_parent.py [--rounds N] [--framework NAME ...]

For each framework (also those whose declaration keeps them cold: `no_warm_parent`), a
BERT-base cell (b1 s16, its default inference recipe, a 1.5-s loop),
cold (DLBENCH_WARM_PARENT=0) and warm taking turns, N rounds (the warm parent started
before the first round: its import is paid once and reported apart). Per way: the
command's wall time, the start-up marks (imports done, first timed iteration) and the
cell's median; then warm / cold of each, the medians' ratio with the range over rounds.
"""

import argparse
import os
import statistics
import time

from cells import label, run_cell

from dlbench.catalogue import frameworks

OPTIONS = ("--min-duration-s=1.5", "--min-iterations=6", "--target-ci=0")


def one(framework: str, warm: bool) -> dict:
    os.environ["DLBENCH_WARM_PARENT"] = "all" if warm else "0"  # declared off ones too
    start = time.perf_counter()
    record = run_cell(framework, "bert-base-uncased", 1, 16,
                      frameworks.get(framework).default_inference, *OPTIONS)
    return {"wall_s": time.perf_counter() - start, "median_ms": record["timing"]["median_ms"],
            "imports_s": record["startup"]["imports_done_s"],
            "first_s": record["startup"]["first_timed_iteration_s"],
            "parent": record["process"]["warm_parent"]}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--framework", nargs="+", default=["pytorch", "tensorflow", "jax"])
    args = parser.parse_args()
    for framework in args.framework:
        started = one(framework, warm=True)["parent"]  # the parent's import, paid once
        ways: dict[str, list[dict]] = {"cold": [], "warm": []}
        for round_ in range(args.rounds):
            for way in (("cold", "warm") if round_ % 2 == 0 else ("warm", "cold")):
                ways[way].append(one(framework, warm=way == "warm"))
        print(f"{label(framework, 'bert-base-uncased', 1, 16, 'default')}: "
              f"warm parent's import {started['imports_s']:.2f} s (once)")
        for way, runs in ways.items():
            print(f"  {way}: command {_median(runs, 'wall_s'):.2f} s, imports done "
                  f"{_median(runs, 'imports_s'):.2f} s, first timed iteration "
                  f"{_median(runs, 'first_s'):.2f} s, cell median "
                  f"{_median(runs, 'median_ms'):.1f} ms (medians of {len(runs)})")
        ratios = [w["median_ms"] / c["median_ms"] for w, c in zip(ways["warm"], ways["cold"],
                                                                   strict=True)]
        command = _median(ways["warm"], "wall_s") / _median(ways["cold"], "wall_s")
        print(f"  warm / cold: command {command:.2f}, cell median {statistics.median(ratios):.3f} "
              f"(rounds {min(ratios):.3f}-{max(ratios):.3f})")


def _median(runs: list[dict], key: str) -> float:
    return statistics.median(run[key] for run in runs)


if __name__ == "__main__":
    main()
