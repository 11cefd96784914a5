"""Build a training data set: python -m dlbench.data --dataset NAME --out FOLDER […]

--check: say whether the set in FOLDER still matches its manifest (every file there, of
its size and checksum), naming what does not; --repair: check, and build it again if it is
missing or damaged (with the same options as building it)."""

import argparse
import sys
import time
from pathlib import Path

from dlbench.data import MANIFEST, DataSetError, damage, read_manifest, write
from dlbench.measure import devices

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
        # A digit's mirror image is not that digit (a 2 flipped is no 2): no flips.
        return write(out, dataset, digits.CLASSES, train_split, test_split,
                     {"origin": "sklearn.datasets.load_digits, upscaled 4× to 32×32 RGB",
                      "seed": seed}, flip=False)
    from dlbench.data import cifar10

    classes, train_split, test_split = cifar10.load(cifar10_dir)
    return write(out, dataset, classes, train_split, test_split,
                 {"origin": f"CIFAR-10 python batches in {cifar10_dir}"})


def damage_of(folder: Path) -> list[str]:
    """Everything in the folder that does not match its manifest, checksums included."""
    try:
        return damage(read_manifest(folder / MANIFEST), checksums=True)
    except (FileNotFoundError, DataSetError) as exc:
        return [str(exc)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m dlbench.data", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dataset", choices=SOURCES, help="the source (not with --check)")
    parser.add_argument("--out", required=True, type=Path, help="the data set's folder")
    parser.add_argument("--train", type=int, default=2000, help="synthetic: training images")
    parser.add_argument("--test", type=int, default=500, help="synthetic: test images")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--cifar10-dir", default="", help="cifar10: the batches' folder")
    action = parser.add_mutually_exclusive_group()
    action.add_argument("--check", action="store_true",
                        help="check the set in --out against its manifest; build nothing")
    action.add_argument("--repair", action="store_true",
                        help="build the set again if it is missing or damaged")
    args = parser.parse_args(argv)
    if args.check or args.repair:
        problems = damage_of(args.out) if (args.out / MANIFEST).exists() or args.check \
            else ["no data set there yet"]
        for problem in problems:
            print(f"dlbench.data: {problem}", file=sys.stderr)
        if not problems:
            print(f"{args.out}: intact (every file of its manifest, size and checksum)")
            return 0
        if args.check:
            return 1
        print(f"dlbench.data: building {args.out} again", file=sys.stderr)
    if args.dataset is None:
        parser.error("--dataset is required to build a data set")
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
