"""measurement.process per_group against side_by_side, alternately in one sitting (issue 38).

    .venv/bin/python bench/process_modes.py OUT [--pairs N] [--rounds N] [--scenario S]

Runs the default matrix's one scenario (inference by default) through the real snakemake,
once per mode and pair, the modes alternating A B B A A B … so that a machine that drifts
over the sitting favours neither, each run in a fresh folder OUT/<pair>-<mode>. Then, per
run: its wall time, the spread between processes that sets the answer's intervals
(dlbench.analysis.rounds, the sd of logs) and how many of the answer's ratios have a 95%
interval within ±10% (bench/answer_intervals.py); per mode, the same over its runs.
"""

import argparse
import math
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
from answer_intervals import answer_widths, load

from dlbench.analysis import rounds

REPO = Path(__file__).resolve().parents[1]
MODES = ("per_group", "side_by_side")


def run(folder: Path, mode: str, scenario: str, count: int) -> float:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "modes.yaml").write_text(
        f"scenarios: [{scenario}]\nmeasurement: {{process: {mode}, rounds: {count}}}\n")
    start = time.monotonic()
    subprocess.run([str(REPO / ".venv/bin/snakemake"), "--directory", str(folder),
                    "--snakefile", str(REPO / "Snakefile"),
                    "--configfile", str(REPO / "config/config.yaml"), str(folder / "modes.yaml"),
                    "--workflow-profile", str(REPO / "workflow/profiles/default"),
                    "--cores", "2", "--quiet"], check=True,
                   stdout=(folder / "run.log").open("w"), stderr=subprocess.STDOUT)
    return time.monotonic() - start


def figures(folder: Path, scenario: str) -> tuple[float | None, int, int]:
    cells = load(folder / "results")
    spreads = rounds.run_spreads(cells)
    within, total = answer_widths(cells, spreads)
    found = spreads.get(scenario)
    return (math.sqrt(found.variance) if found else None), within, total


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("out", type=Path)
    parser.add_argument("--pairs", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--scenario", default="inference")
    args = parser.parse_args()
    seen: dict[str, list] = {mode: [] for mode in MODES}
    for pair in range(args.pairs):
        for mode in (MODES if pair % 2 == 0 else MODES[::-1]):
            folder = args.out / f"{pair}-{mode}"
            wall = run(folder, mode, args.scenario, args.rounds)
            sd, within, total = figures(folder, args.scenario)
            seen[mode].append((wall, sd, within, total))
            print(f"{folder.name}: {wall:.0f} s, spread between processes "
                  f"{'-' if sd is None else f'{sd:.3f}'}, {within} of {total} answer ratios "
                  f"within ±10%", flush=True)
    for mode, found in seen.items():
        sds = [sd for _, sd, _, _ in found if sd is not None]
        rms = math.sqrt(np.mean(np.square(sds)))
        print(f"{mode}: wall {np.mean([w for w, *_ in found]):.0f} s; spread "
              f"{', '.join(f'{s:.3f}' for s in sds)} (rms {rms:.3f}); "
              f"{sum(f[2] for f in found)} of {sum(f[3] for f in found)} ratios within ±10%")


if __name__ == "__main__":
    sys.exit(main())
