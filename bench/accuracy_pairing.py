"""Do the frameworks' trained models pair by seed? What an accuracy match with power would
have to see through (issue 39, item 4).

    .venv/bin/python bench/accuracy_pairing.py [--seeds 4] [--frameworks tensorflow jax]

The default's training (the CNN on the digits, batch 64, Adam at 0.001, 3 epochs) in each
framework, every seed in a fresh process and every framework starting a seed from the same
weights, three ways:

- `w0`: the file pipeline; each framework draws its own batch order, augmentation and
  dropout masks;
- `memory`: the in-memory pipeline, where TensorFlow's and JAX's draw the order and the
  augmentation alike from numpy (PyTorch's from torch); dropout their own;
- `memory, no dropout`: the same with the CNN's three dropout rates set to 0 in the
  measuring process: between TensorFlow and JAX only the arithmetic differs.

Per way: each framework's final test accuracy by seed, its spread over the seeds, and the
spread (standard deviation) of the per-seed difference between each pair of frameworks:
the noise a test pairing the frameworks by seed would face.
"""

import argparse
import dataclasses
import itertools
import json
import statistics
import subprocess
import sys
import tempfile
import types
from pathlib import Path

STEPS = {"pytorch": "eager", "tensorflow": "graph", "jax": "jit"}
WAYS = {"w0": ("w0", False), "memory": ("memory", False),
        "memory, no dropout": ("memory", True)}


def without_dropout(argv: list[str]) -> int:
    """`dlbench` with the CNN's dropout rates at 0 (this process and the children it forks)."""
    from dlbench.catalogue.models import vision

    cnn = dataclasses.replace(vision.MODELS["cnn"], dropout=(0.0, 0.0, 0.0))
    vision.MODELS = types.MappingProxyType({**vision.MODELS, "cnn": cnn})
    from dlbench.cli import main

    return main(argv)


def accuracies(framework: str, pipeline: str, no_dropout: bool, seeds: int, data: Path,
               out: Path) -> list[float]:
    """The final test accuracy (%) of each seed."""
    command = [sys.executable, __file__, "--no-dropout-run"] if no_dropout else \
        [sys.executable, "-m", "dlbench"]
    subprocess.run(
        [*command, "run", "--scenario=training", f"--framework={framework}", "--model=cnn",
         "--device=cpu", "--batch=64", "--dataset=digits", f"--pipeline={pipeline}",
         "--optimizer=adam", f"--optimization={STEPS[framework]}", "--epochs=3",
         f"--data={data}", "--learning-rate=0.001", f"--seeds={seeds}", "--no-ablation",
         "--no-breakdown", f"--out={out}"], check=True, capture_output=True, text=True)
    record = json.loads(out.read_text())
    if record["status"] != "ok":
        raise RuntimeError(f"{record['cell_id']}: {record['reason']}")
    return [100 * a for a in record["training"]["final_accuracies"]]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=4)
    parser.add_argument("--frameworks", nargs="+", default=["tensorflow", "jax"],
                        choices=list(STEPS))
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "digits"
        subprocess.run([sys.executable, "-m", "dlbench.data", "--dataset=digits",
                        f"--out={data}"], check=True, capture_output=True)
        for way, (pipeline, no_dropout) in WAYS.items():
            found = {fw: accuracies(fw, pipeline, no_dropout, args.seeds, data,
                                    Path(tmp) / f"{fw}.json") for fw in args.frameworks}
            print(f"{way}:")
            for fw, values in found.items():
                print(f"  {fw:10} {' '.join(f'{v:5.1f}' for v in values)}  "
                      f"(spread over seeds {statistics.stdev(values):.1f})")
            for a, b in itertools.combinations(found, 2):
                differences = [x - y for x, y in zip(found[a], found[b], strict=True)]
                print(f"  {a} - {b}: {' '.join(f'{d:+5.1f}' for d in differences)}  "
                      f"(spread of the per-seed difference {statistics.stdev(differences):.1f})",
                      flush=True)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--no-dropout-run"]:
        sys.exit(without_dropout(sys.argv[2:]))
    main()
