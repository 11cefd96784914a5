"""How wide the answer's ratio intervals are, and whether they cover what other runs find.

    .venv/bin/python bench/answer_intervals.py RESULTS [RESULTS ...]

Each RESULTS is a finished default run's results/ folder (runs/*.json, measured in rounds).
For every run: the answer's ratios (each framework's best, and the runner-up, over the
fastest: dlbench.analysis.headline), how many have a 95% interval within ±10% of the
ratio, and the spread between processes that sets their width (dlbench.analysis.rounds).
Then, over the runs together, a calibration: every timed cell of a size against PyTorch
eager's of that size, paired round by round (dlbench.analysis.rounds.ratio_of), and how
often a run's interval holds the mean of the other runs' log ratios — a check of the
intervals against the spread between runs, which they claim to carry. The other runs' mean
is itself uncertain, so this coverage errs low. Runs of other matrices than the first's
are left out of the calibration.
"""

import math
import sys
from pathlib import Path

import numpy as np

from dlbench.analysis import headline, rounds
from dlbench.analysis.summary import axes, derive, timed
from dlbench.records import aggregate

WITHIN = 1.10
REFERENCE = ("pytorch", "eager")


def load(folder: Path):
    frame = timed(derive(aggregate.summarize(sorted((folder / "runs").glob("*.json")))))
    return frame[~frame["profiled"]]


def sizes(cells):
    """(scenario, model and sizes, its cells) for every input size the answer has a row of."""
    for scenario, group in cells.groupby("scenario"):
        keys = ["model"] + [a for a in axes(scenario) if a in group]
        for size_key, size in group.groupby(keys):
            yield scenario, size_key, size


def answer_widths(cells, spreads: dict) -> tuple[int, int]:
    """(ratios within ±10%, ratios) among the answer's distinct ratios: each framework's
    best and the runner-up over the fastest."""
    within = total = 0
    for scenario, _, size in sizes(cells):
        size = size[~headline.disqualified(size)].sort_values("headline_ms")
        if len(size) < 2:
            continue
        best = size.iloc[0]
        bests = {own.index[0] for _, own in size.groupby("framework")}
        for index in (bests | {size.index[1]}) - {best.name}:
            ratio, low, high, _ = rounds.ratio_of(size.loc[index], best, spreads.get(scenario))
            total += 1
            within += ratio / low <= WITHIN and high / ratio <= WITHIN
    return within, total


def pairs(cells, spreads: dict) -> dict:
    """{(scenario, sizes, framework, optimization): (log ratio, half-width in logs)} of
    every cell against PyTorch eager's of its size."""
    out = {}
    for scenario, size_key, size in sizes(cells):
        reference = size[(size["framework"] == REFERENCE[0])
                         & (size["optimization"] == REFERENCE[1])]
        if reference.empty:
            continue
        base = reference.iloc[0]
        for _, row in size.drop(index=base.name).iterrows():
            ratio, low, high, n = rounds.ratio_of(row, base, spreads.get(scenario))
            if n:
                out[(scenario, size_key, row["framework"], row["optimization"])] = (
                    math.log(ratio), (math.log(high) - math.log(low)) / 2)
    return out


def main() -> None:
    folders = [Path(a) for a in sys.argv[1:]]
    runs = {folder: load(folder) for folder in folders}
    spreads = {folder: rounds.run_spreads(cells) for folder, cells in runs.items()}
    for folder, cells in runs.items():
        within, total = answer_widths(cells, spreads[folder])
        spread = spreads[folder].get("inference")
        sd = f"{math.sqrt(spread.variance):.3f}" if spread else "-"
        print(f"{folder}: {within} of {total} answer ratios within ±10%; the spread between "
              f"processes pooled over inference and generation (sd of logs) {sd}")
    found = {folder: pairs(cells, spreads[folder]) for folder, cells in runs.items()}
    keys = set(found[folders[0]])
    same = [f for f in folders if set(found[f]) == keys]
    covered = total = 0
    widths = []
    for key in sorted(keys, key=str):
        logs = np.array([found[f][key][0] for f in same])
        for i, folder in enumerate(same):
            others = np.delete(logs, i).mean()
            log, half = found[folder][key]
            total += 1
            covered += abs(log - others) <= half
            widths.append(half)
    print(f"calibration over {len(same)} runs of one matrix, {len(keys)} pairs each: "
          f"{covered} of {total} intervals ({covered / max(total, 1):.1%}) hold the other "
          f"runs' mean; median half-width {np.median(widths):.3f} in logs")


if __name__ == "__main__":
    main()
