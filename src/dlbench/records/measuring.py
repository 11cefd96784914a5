"""How much of a run's wall time went into measuring: the cells' timed loops — every loop
whose samples a record publishes: the cell's own (a training cell's timed steps, from the
first to the last), a generation's first-token loop, a training cell's ablation steps —
against the wall time of the whole run: set-up, imports, models, compilation, warm-up, the
machine-noise probe, references, peaks and the report included. The
workflow prints it when a run ends; bench/overhead.py compares ways of running.

Only the cells this run measured count (their result finished after the run started): a
cell measured by an earlier run cost this run nothing.
"""

from collections.abc import Iterable
from datetime import datetime
from pathlib import Path

from dlbench.records import result


def share(paths: Iterable[Path], started: float, ended: float) -> dict:
    """wall_s, measuring_s (the timed loops of every round), share, cells (measured by this
    run), and per scenario its cells and measuring_s."""
    measuring, cells, by_scenario = 0.0, 0, {}
    for path in paths:
        try:
            record = result.read_json(Path(path))
        except (OSError, ValueError):
            continue
        finished = record.get("finished_at")
        if record.get("status") != "ok" or not finished or \
                datetime.fromisoformat(finished).timestamp() < started:
            continue
        loop = timed_s(record)
        measuring += loop
        cells += 1
        scenario = by_scenario.setdefault(record["params"]["scenario"],
                                          {"cells": 0, "measuring_s": 0.0})
        scenario["cells"] += 1
        scenario["measuring_s"] += loop
    wall = max(ended - started, 1e-9)
    return {"wall_s": wall, "measuring_s": measuring, "share": measuring / wall,
            "cells": cells, "by_scenario": by_scenario}


def timed_s(record: dict) -> float:
    """The seconds a cell's record spent in its timed loops, every round's."""
    loop = (record.get("timing") or {}).get("loop_s") or 0.0
    first = ((record.get("generation") or {}).get("first_token") or {}).get("samples_ms")
    ablation = record.get("ablation") or {}
    # A training cell's ablation: in blocks between its epochs, inside the loop's window
    # (records with `blocks`); timed after it before.
    after = 0.0 if "blocks" in ablation else ablation.get("wall_s") or 0.0
    return loop + sum(first or []) / 1e3 + after


def describe(found: dict) -> str:
    """'dlbench: 9 min 12 s, of which 5 min 40 s in the timed loops of 32 cells (62%):
    inference 24 cells 3 min 1 s, …'."""
    parts = ", ".join(f"{name} {s['cells']} cells {_duration(s['measuring_s'])}"
                      for name, s in sorted(found["by_scenario"].items()))
    text = (f"dlbench: this run took {_duration(found['wall_s'])}, of which "
            f"{_duration(found['measuring_s'])} in the timed loops of {found['cells']} cells "
            f"({found['share']:.0%})")
    return f"{text}: {parts}" if parts else f"{text}; no cell was measured"


def _duration(seconds: float) -> str:
    minutes, rest = divmod(round(seconds), 60)
    return f"{minutes} min {rest} s" if minutes else f"{rest} s"
