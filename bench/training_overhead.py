"""What looking inside a training step costs: the breakdown (each part synchronized; in
TensorFlow graph/XLA, gradients and optimizer as two functions) and a py-spy profile, each
against the same cell without it.

    .venv/bin/python bench/training_overhead.py [--rounds 4] [--epochs 2]

Each measurement is a fresh `dlbench run` of one training cell (a data set built once in a
temporary folder); with and without alternate (A B, B A, …) and the ratio is the median of
each round's ratio of median step times (> 1: the instrumented cell is slower).
"""

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CELLS = [  # (framework, optimization, pipeline)
    ("pytorch", "eager", "w0"),
    ("tensorflow", "graph", "w0"),
]
COMPARISONS = {"breakdown": ("--breakdown", "--no-breakdown"),
               "profile": ("--profile", "--no-profile")}


def step_ms(cell: tuple, flag: str, data: Path, epochs: int, out: Path) -> float:
    framework, optimization, pipeline = cell
    subprocess.run(
        [sys.executable, "-m", "dlbench", "run", "--scenario=training", f"--framework={framework}",
         "--model=cnn", "--device=cpu", "--batch=64", "--dataset=synthetic",
         f"--pipeline={pipeline}", "--optimizer=sgd", f"--optimization={optimization}",
         f"--epochs={epochs}", f"--data={data}", "--no-ablation", flag, f"--out={out}"],
        check=True, capture_output=True, text=True)
    record = json.loads(out.read_text())
    if record["status"] != "ok":
        raise RuntimeError(f"{record['cell_id']}: {record['reason']}")
    return record["timing"]["median_ms"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--epochs", type=int, default=2)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "synthetic"
        subprocess.run([sys.executable, "-m", "dlbench.data", "--dataset=synthetic",
                        f"--out={data}", "--train=1000", "--test=100"], check=True,
                       capture_output=True)
        print(f"{'cell':32} {'what':10} {'with ms':>8} {'without':>8} {'ratio':>6}  "
              f"(medians of {args.rounds} rounds, alternating; range of the ratio)")
        for cell in CELLS:
            for what, (on, off) in COMPARISONS.items():
                with_, without = [], []
                for round_ in range(args.rounds):
                    for flag in (on, off)[:: -1 if round_ % 2 else 1]:
                        ms = step_ms(cell, flag, data, args.epochs, Path(tmp) / "cell.json")
                        (with_ if flag == on else without).append(ms)
                ratios = [a / b for a, b in zip(with_, without, strict=True)]
                print(f"{' '.join(cell):32} {what:10} {statistics.median(with_):8.1f} "
                      f"{statistics.median(without):8.1f} {statistics.median(ratios):6.3f}  "
                      f"({min(ratios):.3f}–{max(ratios):.3f})", flush=True)


if __name__ == "__main__":
    main()
