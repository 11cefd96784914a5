"""Would pairing cells seconds apart, instead of minutes, narrow the answer's ratios? (issue 38)

The answer's ratio between two frameworks is paired round by round, but a round measures
the frameworks' cells a minute or two apart, and on these machines the pace changes within
seconds (bench/thread_noise.py). Here two cells (BERT base, one size, two frameworks'
recipes) are measured the other way: both processes built and warmed up side by side,
then taking turns in short timed slices — one process times its forward pass while the
other waits on a pipe, using no CPU — so that each pair of slices is seconds apart. Several
such pairs of fresh processes, the first to time taking turns.

Per pair of processes: the median of each side's slice medians and their ratio, and the
spread of the slices' log-ratios (standard deviation) beside that of each side's own
slices: where the pace moves both sides alike, the ratio spreads less than either side.
Over the pairs: the spread of the pairs' log-ratios, which is what a ratio from one
process a side carries (the rounds' figure), against the machine's drift within a pair.

    .venv/bin/python bench/live_pairs.py [--pairs 4] [--slices 12] [--slice-s 1]
        [--a pytorch:onednn] [--b tensorflow:graph] [--batch 1] [--seqlen 16]

Run it on an idle machine; it reports, it does not decide.
"""

import argparse
import math
import statistics
import subprocess
import sys
import time
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"


def child(framework: str, optimization: str, batch: int, seqlen: int, threads: int) -> None:
    """Builds the cell's step, warms it up, answers READY; then times one slice of the
    given seconds for each line it reads and answers the slice's median ms."""
    sys.path.insert(0, str(SRC))
    import numpy as np

    from dlbench.catalogue import frameworks, recipes
    from dlbench.catalogue.models import get_model
    from dlbench.frameworks import import_ops, load_backend, load_ops
    from dlbench.scenarios import registry
    from dlbench.scenarios.inference import prepare

    backend = load_backend(framework, "cpu", threads, 1)
    import_ops(framework, "inference")
    scenario = registry.get("inference")
    optimization = recipes.optimization(scenario.recipes_of, optimization, framework)
    backend.set_arithmetic(optimization.precision.name)
    ops = load_ops(backend, "inference")
    model = ops.build(get_model("bert-base-uncased"), 0, optimization)
    ids = np.random.default_rng(0).integers(16, 1000, size=(batch, seqlen))
    step = prepare(ops, model, ops.inputs(ids), optimization,
                   frameworks.get(framework).default_inference)
    for _ in range(5):
        step()
        backend.synchronize()
    print("READY", flush=True)
    for line in sys.stdin:
        seconds, times = float(line), []
        begin = time.perf_counter()
        while time.perf_counter() - begin < seconds or len(times) < 3:
            start = time.perf_counter()
            step()
            backend.synchronize()
            times.append(time.perf_counter() - start)
        print(statistics.median(times) * 1e3, flush=True)


def start(side: str, args) -> subprocess.Popen:
    framework, optimization = side.split(":")
    return subprocess.Popen(
        [sys.executable, __file__, "--child", framework, optimization, str(args.batch),
         str(args.seqlen), str(args.threads)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)


def ask(process: subprocess.Popen, line: str) -> str:
    process.stdin.write(line + "\n")
    process.stdin.flush()
    return process.stdout.readline().strip()


def pair(args, first: int) -> tuple[list[float], list[float]]:
    processes = [start(args.a, args), start(args.b, args)]
    for process in processes:  # both built side by side; nothing timed yet
        if process.stdout.readline().strip() != "READY":
            sys.exit(f"a child failed: {process.args}")
    slices = ([], [])
    for turn in range(args.slices):
        order = (first, 1 - first) if turn % 2 == 0 else (1 - first, first)
        for side in order:
            slices[side].append(float(ask(processes[side], str(args.slice_s))))
    for process in processes:
        process.stdin.close()
        process.wait()
    return slices


def sd_log(values: list[float]) -> float:
    return statistics.stdev(math.log(v) for v in values)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=4)
    parser.add_argument("--slices", type=int, default=12)
    parser.add_argument("--slice-s", type=float, default=1.0)
    parser.add_argument("--a", default="pytorch:onednn")
    parser.add_argument("--b", default="tensorflow:graph")
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--seqlen", type=int, default=16)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--child", nargs=5, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        framework, optimization, batch, seqlen, threads = args.child
        child(framework, optimization, int(batch), int(seqlen), int(threads))
        return
    print(f"{args.a} over {args.b}, BERT base b{args.batch} s{args.seqlen}, {args.slices} "
          f"slices of {args.slice_s:g} s a side in each pair of processes")
    ratios = []
    for index in range(args.pairs):
        a, b = pair(args, index % 2)
        logs = [math.log(x / y) for x, y in zip(a, b, strict=True)]
        ratio = math.exp(statistics.median(logs))
        ratios.append(ratio)
        print(f"pair {index}: {statistics.median(a):8.2f} / {statistics.median(b):8.2f} ms = "
              f"{ratio:.3f}; sd(log) of slices: a {sd_log(a):.3f}, b {sd_log(b):.3f}, "
              f"ratio {statistics.stdev(logs):.3f}", flush=True)
    if len(ratios) > 1:
        print(f"between pairs of processes: ratios {min(ratios):.3f}-{max(ratios):.3f}, "
              f"sd(log) {sd_log(ratios):.3f}")


if __name__ == "__main__":
    main()
