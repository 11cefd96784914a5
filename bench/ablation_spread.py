"""How far an in-memory pipeline's efficiency strays from 100% between processes.

Fed from memory, a training cell's steps and its ablation (the same steps fed batches
already on the device) do the same work, so the efficiency should read 100% in every
process. What it reads instead shows how much of the verdict is the machine drifting
between the two: the PyTorch CNN cell of tests/test_bottleneck.py (batch 32, 3 epochs of
the `memory` pipeline, a synthetic set of 320 images), one fresh process after another.

With several checkouts (`--checkout`, each a folder with its own `src/`), their processes
take turns (A B A B …): a checkout whose ablation is timed otherwise, measured side by
side with this one through the same hour of the machine. Per checkout: each process's
efficiency and 95% interval, their range and standard deviation, how many intervals lie
wholly below 95% (read as partly input-bound) or above 100% (flagged as no ceiling).

    .venv/bin/python bench/ablation_spread.py [--processes 8] [--checkout ../before]
"""

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from dlbench.data import __main__ as data_cli
from dlbench.records import result

HERE = Path(__file__).resolve().parents[1]
CELL = ["--scenario=training", "--framework=pytorch", "--model=cnn", "--device=cpu",
        "--batch=32", "--dataset=synthetic", "--pipeline=memory", "--optimizer=sgd",
        "--optimization=eager", "--epochs=3", "--warmup-iterations=1", "--min-iterations=5",
        "--min-duration-s=0.5"]
PARTLY = 0.95  # dlbench.analysis.bottleneck.PARTLY_EFFICIENCY


def efficiency(checkout: Path, data: Path, out: Path) -> tuple[float, float, float]:
    """One fresh process of the cell with checkout's dlbench: its efficiency and interval."""
    env = dict(os.environ, PYTHONPATH=str(checkout / "src"))
    done = subprocess.run([sys.executable, "-m", "dlbench", "run", *CELL, f"--data={data}",
                           f"--out={out}"], capture_output=True, text=True, env=env)
    if done.returncode:
        sys.exit(done.stderr[-3000:])
    record = result.read(out)
    if record["status"] != "ok":
        sys.exit(f"{checkout}: {record['status']}: {record['reason']}")
    ablation = record["ablation"]
    return ablation["efficiency"], *ablation["efficiency_ci95"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--processes", type=int, default=8, help="per checkout")
    parser.add_argument("--checkout", type=Path, action="append", default=[],
                        help="another checkout measured in turns with this one")
    args = parser.parse_args()
    checkouts = [HERE, *(c.resolve() for c in args.checkout)]
    found: dict[Path, list[tuple[float, float, float]]] = {c: [] for c in checkouts}
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "data"
        data_cli.build("synthetic", data, 320, 64, 0)
        for i in range(args.processes):
            for checkout in checkouts:
                found[checkout].append(efficiency(checkout, data, Path(tmp) / f"{i}.json"))
                value, low, high = found[checkout][-1]
                print(f"{checkout}: process {i + 1}: {value:.3f} ({low:.3f}-{high:.3f})",
                      flush=True)
    for checkout, rows in found.items():
        values = [v for v, _, _ in rows]
        print(f"{checkout}: efficiency {min(values):.3f}-{max(values):.3f}, standard "
              f"deviation {statistics.stdev(values):.3f} over {len(values)} processes; "
              f"{sum(high < PARTLY for _, _, high in rows)} wholly below {PARTLY:.0%}, "
              f"{sum(low > 1 for _, low, _ in rows)} wholly above 100%")


if __name__ == "__main__":
    main()
