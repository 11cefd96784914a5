"""Is the machine's noise in each core, or in splitting one operation across both? (issue 38)

One fixed float32 matrix product (PyTorch's, MKL on the CPU) timed over and over for a
while, three ways taking turns in fresh processes:

- one-thread: one process on one thread, the other core idle;
- two-threads: one process on two threads, each product split across both cores (what a
  cell on a 2-core machine does);
- two-processes: two processes of one thread each, side by side (both cores busy, no work
  shared between them); each process's figures are shown.

Per way: the median product time, the 0.25-s samples' 10th and 90th percentiles over that
median, and the lowest and highest 5-s window (a window's median over the run's): the
scale on which a cell's loop of a few seconds and a whole process see the machine.

    .venv/bin/python bench/thread_noise.py [--seconds 40] [--turns 2] [--size 1024]

Run it on an idle machine; it reports, it does not decide.
"""

import argparse
import json
import statistics
import subprocess
import sys
import time

SAMPLE_S = 0.25
WINDOW = 20  # samples in a window: 5 s


def child(threads: int, seconds: float, size: int) -> None:
    """Times the product for `seconds` and prints its samples (ms a product) as JSON."""
    import torch

    torch.set_num_threads(threads)
    a, b = torch.randn(size, size), torch.randn(size, size)
    for _ in range(10):  # MKL picks its kernel, the pages are touched
        a @ b
    samples, begin = [], time.perf_counter()
    while time.perf_counter() - begin < seconds:
        start, count = time.perf_counter(), 0
        while time.perf_counter() - start < SAMPLE_S:
            a @ b
            count += 1
        samples.append((time.perf_counter() - start) / count * 1e3)
    print(json.dumps(samples))


def run(threads: int, processes: int, seconds: float, size: int) -> list[list[float]]:
    command = [sys.executable, __file__, "--child", str(threads), str(seconds), str(size)]
    children = [subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
                for _ in range(processes)]
    return [json.loads(child.communicate()[0]) for child in children]


def summary(samples: list[float]) -> str:
    median = statistics.median(samples)
    deciles = statistics.quantiles(samples, n=10)
    windows = [statistics.median(samples[i:i + WINDOW]) / median
               for i in range(0, len(samples) - WINDOW + 1, WINDOW)]
    return (f"{median:9.2f} ms  samples p10-p90 {deciles[0] / median:.3f}-"
            f"{deciles[-1] / median:.3f}  5-s windows {min(windows):.3f}-{max(windows):.3f}")


WAYS = {"one-thread": (1, 1), "two-threads": (2, 1), "two-processes": (1, 2)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=40.0)
    parser.add_argument("--turns", type=int, default=2)
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        threads, seconds, size = args.child
        child(int(threads), float(seconds), int(size))
        return
    print(f"{args.size}x{args.size} float32 products, {args.seconds:g} s a process")
    for turn in range(args.turns):
        for way in list(WAYS) if turn % 2 == 0 else list(WAYS)[::-1]:
            for samples in run(*WAYS[way], args.seconds, args.size):
                print(f"turn {turn}  {way:14}{summary(samples)}", flush=True)


if __name__ == "__main__":
    main()
