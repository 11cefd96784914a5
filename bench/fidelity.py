"""Fidelity: dlbench's median against an independent timer of the same step, same run.

    .venv/bin/python bench/fidelity.py [--device gpu] [--sample-hz 0]

PyTorch cells against torch.utils.benchmark.Timer.blocked_autorange, TensorFlow cells
against a bare perf_counter loop. Each measurement is its own fresh process with the same
threads, model, weights and inputs; dlbench and the reference alternate (A B, B A, …), and
the ratio is the median of each round's ratio (pairs taken side by side, so that the
machine's drift between rounds cancels). Target: within 3% of 1.00 on the CPU, 2% on a GPU.

With --device gpu: PyTorch cells only (the GPU machines have no TensorFlow), on CUDA; the
Timer synchronizes CUDA around its blocks, dlbench after every step, and dlbench's CUDA-event
device time is printed beside its host time.
"""

import argparse
import json
import statistics
import subprocess
import sys
import time

from cells import label, run_cell

CELLS = [
    ("pytorch", "bert-base-uncased", 1, 64, "eager"),
    ("pytorch", "distilbert-base-uncased", 2, 64, "eager"),
    ("tensorflow", "distilbert-base-uncased", 1, 64, "graph"),
    ("tensorflow", "bert-base-uncased", 1, 64, "graph"),
]
GPU_CELLS = [
    ("pytorch", "bert-base-uncased", 1, 128, "eager"),
    ("pytorch", "bert-base-uncased", 8, 512, "eager"),
    ("pytorch", "gpt2", 4, 256, "eager-fp16"),
]
THREADS, MIN_TIME_S, ROUNDS = 2, 2.0, 4


def reference(framework: str, model: str, batch: int, seqlen: int, optimization: str,
              device: str = "cpu") -> float:
    """The median ms of the same step, timed by the reference timer (in this process)."""
    from dlbench.catalogue import recipes
    from dlbench.catalogue.models import get_model
    from dlbench.frameworks import load_backend, load_ops
    from dlbench.scenarios.inference import prepare, token_ids

    backend = load_backend(framework, device, THREADS, 1)
    ops = load_ops(backend, "inference")
    spec, recipe = get_model(model), recipes.optimization("inference", optimization, framework)
    backend.set_arithmetic(recipe.precision.name)  # as a dlbench cell does
    built = ops.build(spec, 0, recipe, None)
    inputs = ops.inputs(token_ids(spec, batch, seqlen, 0))
    ops.same_attention_work(built, inputs)
    step = prepare(ops, built, inputs, recipe)
    for _ in range(3):
        step()
    backend.synchronize()
    if framework == "pytorch":
        from torch.utils.benchmark import Timer

        timer = Timer(stmt="step()", globals={"step": step}, num_threads=THREADS)
        return timer.blocked_autorange(min_run_time=MIN_TIME_S).median * 1e3
    samples, start = [], time.perf_counter()
    while time.perf_counter() - start < MIN_TIME_S or len(samples) < 10:
        t0 = time.perf_counter()
        step()
        samples.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(samples)


def reference_in_fresh_process(cell: tuple, device: str) -> float:
    """Under the same host lock as a dlbench cell, so that neither meets other cells."""
    from dlbench.measure import devices

    with devices.exclusive(device):
        done = subprocess.run(
            [sys.executable, __file__, "--reference", json.dumps([*cell, device])],
            check=True, capture_output=True, text=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", choices=["cpu", "gpu"], default="cpu")
    parser.add_argument("--sample-hz", type=float, default=100,
                        help="dlbench's sampling rate (0: off, to see what sampling costs)")
    args = parser.parse_args()
    cells = GPU_CELLS if args.device == "gpu" else CELLS
    print(f"{'cell':46} {'dlbench ms':>10} {'reference ms':>12} {'ratio':>6}  "
          f"(medians of {ROUNDS} rounds; the ratio's range over the rounds)")
    for cell in cells:
        ours, theirs, device_ms = [], [], []
        for round_ in range(ROUNDS):
            # A B, then B A: neither side always runs first in its pair.
            for side in ("dlbench", "reference")[:: -1 if round_ % 2 else 1]:
                if side == "reference":
                    theirs.append(reference_in_fresh_process(cell, args.device))
                    continue
                record = run_cell(*cell, f"--threads={THREADS}",
                                  f"--min-duration-s={MIN_TIME_S}",
                                  f"--sample-hz={args.sample_hz}", device=args.device)
                ours.append(record["timing"]["median_ms"])
                if "device_time" in record["timing"]:
                    device_ms.append(record["timing"]["device_time"]["median_ms"])
        a, b = statistics.median(ours), statistics.median(theirs)
        ratios = [x / y for x, y in zip(ours, theirs, strict=True)]
        timer = "Timer.blocked_autorange" if cell[0] == "pytorch" else "perf_counter loop"
        extra = f", CUDA-event device time {statistics.median(device_ms):.2f} ms" \
            if device_ms else ""
        print(f"{label(*cell):46} {a:10.2f} {b:12.2f} {statistics.median(ratios):6.3f}  "
              f"({min(ratios):.3f}–{max(ratios):.3f}; vs {timer}{extra})")


if __name__ == "__main__":
    if sys.argv[1:2] == ["--reference"]:
        print(json.dumps(reference(*json.loads(sys.argv[2]))))
    else:
        main()
