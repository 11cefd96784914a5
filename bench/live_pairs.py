"""Would pairing cells seconds apart, instead of minutes, narrow the answer's ratios? (issue 38)

The answer's ratio between two frameworks is paired round by round, but a round measures
the frameworks' cells a minute or two apart, and on these machines the pace changes within
seconds (bench/thread_noise.py). Here two cells (BERT base, one size, two frameworks'
recipes) are measured the other way: both processes built and warmed up side by side,
then taking turns in short timed slices — one process times its forward pass while the
other waits on a pipe, using no CPU — so that each pair of slices is seconds apart. Several
such pairs of fresh processes, the first to time taking turns.

Does taking turns cost a side anything (its caches or threads cold after the other's
slice)? With `--long-s`, halfway through its turns each side of a pair times one long
slice, the other side waiting: per side, that slice's median over the median of its four
turns about it (below 1: the turns cost it; above: they flattered it).

Per pair of processes: each side's median (of its slices' medians), the paired ratio
(the median of the slices' ratios, each slice against the other side's next to it), and
the spread of the slices' logs (standard deviation) for each side and for their ratio.
Over the pairs: the spread of each side's medians and of the paired ratios, against that
of the ratios of unpaired processes (side a of one pair over side b of every other pair):
where the machine's pace moves both processes alike, the paired ratios spread less.

    .venv/bin/python bench/live_pairs.py [--pairs 4] [--slices 12] [--slice-s 1]
        [--a pytorch:onednn] [--b tensorflow:graph] [--batch 1] [--seqlen 16] [--threads 2]
        [--long-s 0]

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
    from dlbench.measure import env
    from dlbench.scenarios import registry
    from dlbench.scenarios.inference import prepare

    env.set_thread_variables(threads)  # as `dlbench run` does: before the pools load
    frameworks.leave_out_unused_imports(framework)
    backend = load_backend(framework, "cpu", threads, 1)
    import_ops(framework, "inference")
    scenario = registry.get("inference")
    optimization = recipes.optimization(scenario.recipes_of, optimization, framework)
    backend.set_arithmetic(optimization.precision.name)
    ops = load_ops(backend, "inference")
    # The attention a cell of the default settings runs, and the same work in it.
    model = ops.build(get_model("bert-base-uncased"), 0, optimization,
                      attention=optimization.recipe.attention_of("sdpa"))
    inputs = ops.inputs(np.random.default_rng(0).integers(16, 1000, size=(batch, seqlen)))
    ops.same_attention_work(model, inputs)
    step = prepare(ops, model, inputs, optimization,
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


def pair(args, first: int) -> tuple[list[float], list[float], list[float]]:
    """Each side's slices, and each side's long slice over its turns about it (0: none)."""
    processes = [start(args.a, args), start(args.b, args)]
    for process in processes:  # both built side by side; nothing timed yet
        if process.stdout.readline().strip() != "READY":
            sys.exit(f"a child failed: {process.args}")
    slices, middle = ([], []), args.slices // 2
    long = [0.0, 0.0]
    for turn in range(args.slices):
        if args.long_s and turn == middle:  # amid the turns: the drift about the same
            for side in (first, 1 - first):
                long[side] = float(ask(processes[side], str(args.long_s)))
        order = (first, 1 - first) if turn % 2 == 0 else (1 - first, first)
        for side in order:
            slices[side].append(float(ask(processes[side], str(args.slice_s))))
    for process in processes:
        process.stdin.close()
        process.wait()
    # Each long slice against the side's four turns about it (two before, two after).
    around = [statistics.median(side[max(0, middle - 2):middle + 2]) for side in slices]
    return slices[0], slices[1], [x / y if x else 0.0 for x, y in zip(long, around,
                                                                      strict=True)]


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
    parser.add_argument("--long-s", type=float, default=0.0,
                        help="halfway, one slice this long a side (0: none)")
    parser.add_argument("--child", nargs=5, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        framework, optimization, batch, seqlen, threads = args.child
        child(framework, optimization, int(batch), int(seqlen), int(threads))
        return
    print(f"{args.a} over {args.b}, BERT base b{args.batch} s{args.seqlen}, {args.slices} "
          f"slices of {args.slice_s:g} s a side in each pair of processes")
    medians, ratios, long_over_turns = ([], []), [], ([], [])
    for index in range(args.pairs):
        a, b, long_ratios = pair(args, index % 2)
        logs = [math.log(x / y) for x, y in zip(a, b, strict=True)]
        ratio = math.exp(statistics.median(logs))
        medians[0].append(statistics.median(a))
        medians[1].append(statistics.median(b))
        ratios.append(ratio)
        print(f"pair {index} ({'ab'[index % 2]} first): {medians[0][-1]:8.2f} / "
              f"{medians[1][-1]:8.2f} ms, paired ratio {ratio:.3f}; sd(log) of slices: "
              f"a {sd_log(a):.3f}, b {sd_log(b):.3f}, ratio {statistics.stdev(logs):.3f}",
              flush=True)
        if args.long_s:
            for values, ratio_of_side in zip(long_over_turns, long_ratios, strict=True):
                values.append(ratio_of_side)
            print(f"  a slice of {args.long_s:g} s each, over the turns about it: "
                  f"{long_ratios[0]:.3f} / {long_ratios[1]:.3f}", flush=True)
    if args.long_s:
        print("a long slice over the turns, the median over pairs: "
              + ", ".join(f"{side} {statistics.median(values):.3f} "
                          f"({min(values):.3f}-{max(values):.3f})"
                          for side, values in zip("ab", long_over_turns, strict=True)))
    if len(ratios) > 1:
        unpaired = [x / y for i, x in enumerate(medians[0])
                    for j, y in enumerate(medians[1]) if i != j]
        print(f"between pairs of processes, sd(log): a {sd_log(medians[0]):.3f}, "
              f"b {sd_log(medians[1]):.3f}; paired ratios {min(ratios):.3f}-"
              f"{max(ratios):.3f}: {sd_log(ratios):.3f}; unpaired "
              f"{min(unpaired):.3f}-{max(unpaired):.3f}: {sd_log(unpaired):.3f}")

if __name__ == "__main__":
    main()
