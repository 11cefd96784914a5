"""Build a training data set: python -m dlbench.data --dataset NAME --out FOLDER […]"""

import argparse
import sys
import time
from pathlib import Path

from dlbench import devices
from dlbench.data import write

SOURCES = ("synthetic", "digits", "cifar10")


def build(dataset: str, out: Path, train: int, test: int, seed: int,
          cifar10_dir: str = "") -> Path:
    if dataset == "synthetic":
        from dlbench.data import synthetic

        return write(out, dataset, synthetic.CLASSES, synthetic.generate(train, seed),
                     synthetic.generate(test, seed + 1),
                     {"generator": "dlbench.data.synthetic", "seed": seed})
    if dataset == "digits":
        from dlbench.data import digits

        train_split, test_split = digits.load(digits.TEST_FRACTION, seed)
        return write(out, dataset, digits.CLASSES, train_split, test_split,
                     {"origin": "sklearn.datasets.load_digits, upscaled 4× to 32×32 RGB",
                      "seed": seed})
    from dlbench.data import cifar10

    classes, train_split, test_split = cifar10.load(cifar10_dir)
    return write(out, dataset, classes, train_split, test_split,
                 {"origin": f"CIFAR-10 python batches in {cifar10_dir}"})


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m dlbench.data", description=__doc__)
    parser.add_argument("--dataset", required=True, choices=SOURCES)
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("--train", type=int, default=2000, help="synthetic: training images")
    parser.add_argument("--test", type=int, default=500, help="synthetic: test images")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--cifar10-dir", default="", help="cifar10: the batches' folder")
    args = parser.parse_args(argv)
    start = time.perf_counter()
    try:
        # Like the reference outputs: never beside a timing cell, which it would slow.
        with devices.exclusive("cpu"):
            manifest = build(args.dataset, args.out, args.train, args.test, args.seed,
                             args.cifar10_dir)
    except ValueError as exc:
        print(f"dlbench.data: {exc}", file=sys.stderr)
        return 1
    print(f"{manifest}: written in {time.perf_counter() - start:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
