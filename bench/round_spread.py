"""Whether the spread between a run's rounds could be narrowed after the fact (issue 38): on
the round records that finished runs left (results/rounds/r*/), the residual spread of
the cells' log medians once each cell's level and the machine's drift are taken out, with
the drift modelled three ways:

- one step a round (what dlbench.analysis.rounds assumes), by median polish as it does it
  and by least squares;
- the same, each cell's median first divided by the time per product of the noise probe
  timed beside it (dlbench.measure.noise: the machine's speed at that moment, if it is one);
- a drift linear in the time each cell finished, by least squares.

    .venv/bin/python bench/round_spread.py RUN_FOLDER [RUN_FOLDER ...]

A RUN_FOLDER is where a run wrote results/ (a default run's, with two rounds or more).
Inference and generation cells (their medians); training's rounds are its seeds. It reads
records, it measures nothing.
"""

import argparse
import json
import sys
from datetime import datetime
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
from dlbench.analysis.rounds import _polish  # noqa: E402


def cells(run: Path) -> dict[str, dict[int, tuple[float, float | None, float]]]:
    """cell id → round → (median ms, the probe's ms per product or None, finished at)."""
    found: dict[str, dict[int, tuple]] = {}
    for folder in sorted((run / "results" / "rounds").glob("r[0-9]*")):
        number = int(folder.name[1:])
        for path in sorted(folder.glob("*.json")):
            record = json.loads(path.read_text())
            if record.get("status") != "ok" or record["params"]["scenario"] == "training":
                continue
            noise = record.get("machine_noise") or {}
            probe = (noise["median_sample_ms"] / noise["products_per_sample"]
                     if noise.get("median_sample_ms") else None)
            finished = datetime.fromisoformat(record["finished_at"]).timestamp()
            found.setdefault(record["cell_id"], {})[number] = (
                record["timing"]["median_ms"], probe, finished)
    return found


def polished_sd(logs: np.ndarray) -> float:
    residuals, _ = _polish(logs)
    return float(np.sqrt((residuals ** 2).sum() / ((logs.shape[0] - 1) * (logs.shape[1] - 1))))


def least_squares_sd(y: np.ndarray, columns: list[np.ndarray]) -> float:
    design = np.column_stack(columns)
    beta, *_ = np.linalg.lstsq(design, y, rcond=None)
    residuals = y - design @ beta
    return float(np.sqrt((residuals ** 2).sum() / (len(y) - np.linalg.matrix_rank(design))))


def report(run: Path) -> None:
    found = cells(run)
    rounds = sorted({r for by_round in found.values() for r in by_round})
    kept = sorted(c for c, by_round in found.items()
                  if set(by_round) == set(rounds) and all(p for _, p, _ in by_round.values()))
    if len(rounds) < 2 or len(kept) < 3:
        print(f"{run}: fewer than 2 rounds or 3 cells with probes in every round")
        return
    times = np.log([[found[c][r][0] for r in rounds] for c in kept])
    probes = np.log([[found[c][r][1] for r in rounds] for c in kept])
    finished = np.array([[found[c][r][2] for r in rounds] for c in kept])
    y, n = times.ravel(), len(kept)
    level = np.kron(np.eye(n), np.ones((len(rounds), 1)))  # one column per cell
    step = np.tile(np.eye(len(rounds))[:, 1:], (n, 1))  # one column per round after the first
    minutes = ((finished - finished.min()) / 60).ravel()
    span = minutes.max()
    print(f"{run}: {n} cells × {len(rounds)} rounds over {span:.1f} min; residual sd of the "
          "log medians:")
    print(f"  one step a round, median polish {polished_sd(times):.4f}; divided by the "
          f"probe {polished_sd(times - probes):.4f} (the probe's own: "
          f"{polished_sd(probes):.4f})")
    print(f"  least squares: one step a round {least_squares_sd(y, [level, step]):.4f}; "
          f"linear in time {least_squares_sd(y, [level, minutes]):.4f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+", type=Path)
    for run in parser.parse_args().runs:
        report(run)


if __name__ == "__main__":
    main()
