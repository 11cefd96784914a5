"""What the accuracy match can decide at the default's size: how often frameworks that train
alike are called a match, and how often one trained 2 or 5 points worse is called a
mismatch (issue 39, item 4).

    .venv/bin/python bench/accuracy_power.py train DIR [--seeds 6] [--epochs 4]
                                                       [--decay-epochs 1] [--model cnn]
                                                       [--batch 64] [--pipeline w0]
    .venv/bin/python bench/accuracy_power.py count DIR [--per-side 2] [--draws 300]
                                                       [--plant 0 0.02 0.05]
                                                       [--tolerance 0.03]

`train`: the default's training (the CNN on the digits, batch 64, Adam at 0.001, the file
pipeline w0 — or the tests' `--model tiny-cnn --batch 32 --pipeline memory` —; the learning
rate falling to zero over the last `--decay-epochs`, as by default) in each framework's
default step, `--seeds` seeds each (every seed in a fresh process), one record per framework
in DIR (with each seed's accuracy and the test images it got wrong).

`count`: comparisons of the default's shape from those models — `--per-side` seeds, the
same in every framework, as a run trains them (every set of seeds: 6 seeds give 15 pairs) —
run through dlbench's accuracy match: as trained (the frameworks' real models, each set of
seeds once), and with one framework (each in turn) planted worse by `--plant` points: every
one of its models gets that share of the test images wrong more, drawn at random from those
it got right (`--draws` comparisons, the sets of seeds in turn). Prints the verdicts'
counts per planted size, and which framework a mismatch named. The comparisons share
models, so they are not independent runs: the counts say how the verdict falls over the
models that were trained, not a rate to three digits.
"""

import argparse
import collections
import itertools
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

STEPS = {"pytorch": "eager", "tensorflow": "graph", "jax": "jit"}


def train(folder: Path, seeds: int, epochs: int, decay_epochs: int, model: str, batch: int,
          pipeline: str) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "digits"
        subprocess.run([sys.executable, "-m", "dlbench.data", "--dataset=digits",
                        f"--out={data}"], check=True, capture_output=True)
        for framework, step in STEPS.items():
            out = folder / f"{framework}.json"
            subprocess.run(
                [sys.executable, "-m", "dlbench", "run", "--scenario=training",
                 f"--framework={framework}", f"--model={model}", "--device=cpu",
                 f"--batch={batch}", "--dataset=digits", f"--pipeline={pipeline}",
                 "--optimizer=adam",
                 f"--optimization={step}", f"--epochs={epochs}", f"--data={data}",
                 "--learning-rate=0.001", f"--decay-epochs={decay_epochs}",
                 f"--seeds={seeds}", "--no-ablation",
                 "--no-breakdown", f"--out={out}"], check=True, capture_output=True)
            training = json.loads(out.read_text())["training"]
            print(f"{framework:10} " + " ".join(
                f"{100 * a:5.1f}" for a in training["final_accuracies"]), flush=True)


def rows(records: dict[str, dict], chosen: dict[str, list[int]], plant: dict[str, list],
         folder: Path, tolerance: float | None) -> list[dict]:
    """Summary rows of the records, each cut to its chosen seeds, planted models' misses
    added."""
    from dlbench.records import aggregate

    out = []
    for framework, record in records.items():
        training = record["training"]
        images = training["test_images"]
        wrong = [set(training["wrong_images_per_seed"][i]) | set(extra)
                 for i, extra in zip(chosen[framework], plant[framework], strict=True)]
        accuracies = [1 - len(w) / images for w in wrong]
        row = aggregate.to_row(record, folder / f"{framework}.json")
        row.update(training_final_accuracies=accuracies,
                   training_final_accuracy=float(np.mean(accuracies)),
                   training_seeds=[training["seeds"][i] for i in chosen[framework]],
                   training_wrong_images_per_seed=[sorted(w) for w in wrong])
        if tolerance is not None:
            row["training_accuracy_tolerance"] = tolerance
        out.append(row)
    return out


def count(folder: Path, per_side: int, draws: int, plants: list[float],
          tolerance: float | None) -> None:
    from dlbench.analysis import training
    from dlbench.analysis.summary import derive
    from dlbench.records import aggregate, result

    records = {fw: result.read(folder / f"{fw}.json") for fw in STEPS
               if (folder / f"{fw}.json").exists()}
    rng = np.random.default_rng(0)
    seeds = {fw: len(r["training"]["final_accuracies"]) for fw, r in records.items()}
    images = {r["training"]["test_images"] for r in records.values()}.pop()
    configured = tolerance or records["pytorch"]["training"]["accuracy_tolerance"]
    print(f"{len(records)} frameworks, seeds {seeds}, {images} test images, "
          f"{per_side} seeds a side, {draws} draws, tolerance {100 * configured:g} points")
    # As trained, then each framework planted worse by each non-zero size.
    cases = [(0, None)] if 0 in plants else []
    cases += [(plant, fw) for plant in plants if plant for fw in records]
    for plant, planted in cases:
        verdicts, named, noise, widths = collections.Counter(), collections.Counter(), \
            collections.Counter(), []
        combos = list(itertools.combinations(range(min(seeds.values())), per_side))
        for draw in range(len(combos) if planted is None else draws):
            chosen = {fw: list(combos[draw % len(combos)]) for fw in seeds}
            extra = {fw: [[] for _ in chosen[fw]] for fw in records}
            if planted:
                wrong = records[planted]["training"]["wrong_images_per_seed"]
                extra[planted] = [
                    rng.choice(sorted(set(range(images)) - set(wrong[i])),
                               round(plant * images), replace=False).tolist()
                    for i in chosen[planted]]
            frame = derive(aggregate.table(rows(records, chosen, extra, folder, tolerance)))
            match = training.accuracy_match(frame).iloc[0]
            verdicts[match["verdict"]] += 1
            noise[match["noise"]] += 1
            widths.append(match["statistical"])
            if match["verdict"] == "mismatch":
                named[", ".join(match["differs"])] += 1
        what = "as trained" if planted is None else f"{planted} {100 * plant:.0f} points worse"
        print(f"{what:28} {sum(verdicts.values())} comparisons: {dict(verdicts)}; "
              f"named {dict(named)}; noise from {dict(noise)}; tolerance (99%) median "
              f"{100 * np.median(widths):.2f} points ({100 * min(widths):.2f}-"
              f"{100 * max(widths):.2f})", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    trained = sub.add_parser("train")
    trained.add_argument("folder", type=Path)
    trained.add_argument("--seeds", type=int, default=6)
    trained.add_argument("--epochs", type=int, default=4)
    trained.add_argument("--decay-epochs", type=int, default=1)
    trained.add_argument("--model", default="cnn")
    trained.add_argument("--batch", type=int, default=64)
    trained.add_argument("--pipeline", default="w0")
    counted = sub.add_parser("count")
    counted.add_argument("folder", type=Path)
    counted.add_argument("--per-side", type=int, default=2)
    counted.add_argument("--draws", type=int, default=300)
    counted.add_argument("--plant", type=float, nargs="+", default=[0, 0.02, 0.05])
    counted.add_argument("--tolerance", type=float,
                         help="the configured tolerance (default: the records')")
    args = parser.parse_args()
    if args.command == "train":
        train(args.folder, args.seeds, args.epochs, args.decay_epochs, args.model,
              args.batch, args.pipeline)
    else:
        count(args.folder, args.per_side, args.draws, args.plant, args.tolerance)


if __name__ == "__main__":
    main()
