"""Rounds (measurement.rounds): a cell measured once per round, in fresh processes, the
rounds of every cell interleaved in time by the workflow (A B C, then C B A, …). The job
of a cell's last round combines its rounds' records, in round order, into its result:
the scenario's `combine` (the rounds are its repeats: samples pooled, the spread between
the processes and the interval of the median from it), with each round's own figures kept
in `timing.rounds`, so that a comparison of two cells can pair them round by round
(dlbench.analysis.rounds). A cell that did not end `ok` in some round is not `ok`: its
result is that round's record.
"""

import copy
import statistics
from pathlib import Path

from dlbench.measure.flags import cell_flags
from dlbench.records import result


def round_path(rounds_dir: Path, round_: int, cell_id: str) -> Path:
    """Where a cell's record of one round is kept (dlbench.files.paths.round_result)."""
    return Path(rounds_dir) / f"r{round_}" / f"{cell_id}.json"


def records(rounds_dir: Path, last: int, cell_id: str) -> list[dict]:
    """The cell's records of rounds 0 … last that are there, in round order."""
    found = []
    for round_ in range(last + 1):
        path = round_path(rounds_dir, round_, cell_id)
        if path.is_file():
            found.append(result.read(path))
    return found


def combine(cell, rounds: list[dict]) -> dict:
    """One record of the cell's rounds (in round order): see the module."""
    failed = [r for r in rounds if r["status"] != "ok"]
    if failed:
        record = dict(failed[-1])
        if len(rounds) > 1 and record["reason"]:
            record["reason"] = f"round {rounds.index(failed[-1]) + 1} of {len(rounds)}: " \
                               f"{record['reason']}"
        return record
    figures = {
        "count": len(rounds),
        "started_at": [r["started_at"] for r in rounds],
        "median_ms": [r["timing"]["median_ms"] for r in rounds],
    }
    walls = [(r.get("throughput") or {}).get("wall_step_ms") for r in rounds]
    if all(w is not None for w in walls):
        figures["wall_step_ms"] = walls
    figures["relative_iqr"] = [r["timing"]["relative_iqr"] for r in rounds]
    windows = [r.get("utilization") for r in rounds]
    final = cell.spec.combine(rounds) if len(rounds) > 1 else copy.deepcopy(rounds[0])
    final["timing"]["rounds"] = figures
    # The flags of a cell measured in rounds: the spread within a process is each round's
    # (the pooled samples' would count the machine's drift between rounds as the cell's
    # spread), and the spread between the rounds' processes is judged by the analysis,
    # which sees every cell's rounds and so the drift that moved them all alike
    # (dlbench.analysis.rounds).
    final["flags"] = cell_flags(final, windows,
                                relative_iqr=statistics.median(figures["relative_iqr"]))
    return final
