"""Soak of the training half: the training preset's cells, cut down to one epoch of 512
images, run under random SIGKILLs of their processes and re-run until every cell has its
result; nothing may be lost or corrupted.

    .venv/bin/python bench/soak_training.py [--kills 12] [--seed 0] [--max-runs 8]

While Snakemake runs, a killer waits a random 2-8 s, then SIGKILLs one process of a
measuring cell, of a kind chosen at random among those running that have kills left (a
third of --kills each): the job's supervisor (`dlbench run`: the job dies), its measuring
process (the cell crashes), or one of the cell's DataLoader workers (PyTorch's w2 cells: a
killed one fails its cell, which the next run measures again, so there are always loaders
to kill while kills are left). The workflow is run again until it succeeds (kills not
sent by then are not counted). After every run:
- lost: a cell whose `ok` result was there after an earlier run and is gone or replaced
  (every finished result must survive later runs' faults), or at the end a cell without
  its result;
- corrupted: a result or failed-record file that does not validate, a temporary or child
  file left behind, a summary without exactly the matrix's cells, or an `ok` result of a
  process whose loader worker was killed during its training loop (a kill gone unnoticed).

Measured here (2 cores, beside another test run; `--kills 12 --seed 0`, commit 9ac34e6):
12 kills (4 jobs, 4 measuring processes, 4 loader workers), 3 runs (2 re-runs), 928 s;
0 results lost, 0 corrupted. Every kill was told as what it was: "crashed: the measuring
process was killed by SIGKILL", "crashed: a loader worker died: DataLoader worker (pid …)
is killed by signal: Killed.", or a failed job; the cells measured after them count their
failed attempts.
"""

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import threading
import time
from datetime import datetime
from pathlib import Path

import pandas as pd
import psutil
import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

from dlbench.plan import config  # noqa: E402
from dlbench.plan.matrix import expand_cells  # noqa: E402
from dlbench.records import result  # noqa: E402

# config/presets/training.yaml with one epoch of 512 images: 90 cells, 36 of them measured
# (PyTorch 12, TensorFlow 18, JAX 6; the run quoted above predates JAX in the preset).
PRESET = yaml.safe_load((REPO / "config/presets/training.yaml").read_text())
CONFIG = {**PRESET, "training": {**PRESET["training"], "epochs": 1},
          "data": {"synthetic_train": 512, "synthetic_test": 100}}
KINDS = ("job", "cell", "loader")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kills", type=int, default=12)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--max-runs", type=int, default=8)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    workdir = Path(tempfile.mkdtemp(prefix="dlbench-soak-training-"))
    (workdir / "config.yaml").write_text(yaml.safe_dump(CONFIG))
    cells = {c.id for c in expand_cells(config.validate(CONFIG))}
    print(f"workdir {workdir}; {len(cells)} cells; up to {args.kills} kills", flush=True)
    killer = Killer(rng, args.kills)
    kept: dict[str, str] = {}  # cell → started_at of its ok result, once finished
    lost, corrupted, runs = set(), [], 0
    started = time.monotonic()
    print(f"{'run':>3} {'exit':>4} {'wall s':>6} {'kills':>5} {'ok':>3} {'failed':>6}  kills "
          "this run (kind: cell)", flush=True)
    while runs < args.max_runs:
        runs += 1
        killer.log = []
        run_start = time.monotonic()
        process = subprocess.Popen(
            [str(Path(sys.executable).with_name("snakemake")), "--snakefile",
             str(REPO / "Snakefile"), "--directory", str(workdir), "--configfile",
             str(workdir / "config.yaml"), "--workflow-profile",
             str(REPO / "workflow/profiles/default"), "--cores", "2"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            env=dict(os.environ, PYTHONPATH=str(REPO / "src")))
        thread = threading.Thread(target=killer.run, args=(process,), daemon=True)
        thread.start()
        code = process.wait()
        thread.join()
        records, problems = _read_all(workdir)
        corrupted += problems
        for cell, record in records.items():
            if record["status"] == "ok" and cell in kept and record["started_at"] != kept[cell]:
                lost.add(cell)  # replaced: the earlier finished result was not kept
        for cell in set(kept) - set(records):
            lost.add(cell)
        for cell, record in records.items():
            if record["status"] == "ok":
                kept.setdefault(cell, record["started_at"])
                corrupted += _unnoticed(cell, record, killer.loader_kills)
        failed = len(list((workdir / "results/failed").glob("*.json")))
        ok = sum(r["status"] == "ok" for r in records.values())
        print(f"{runs:>3} {code:>4} {time.monotonic() - run_start:>6.0f} {len(killer.log):>5} "
              f"{ok:>3} {failed:>6}  " + ", ".join(killer.log), flush=True)
        if code == 0:  # every cell has its result (kills the run gave no chance to are unsent)
            break
    records, problems = _read_all(workdir)
    corrupted += problems
    missing = cells - {c for c, r in records.items() if r["status"] in ("ok", "unsupported")}
    corrupted += _summary_problems(workdir, cells)
    lost |= missing
    print(f"faults planted: {killer.sent} ({', '.join(f'{k} {killer.by_kind[k]}' for k in KINDS)})")
    print(f"runs: {runs} (re-runs needed: {runs - 1}); wall {time.monotonic() - started:.0f} s")
    print(f"results lost: {len(lost)} {sorted(lost) if lost else ''}")
    print(f"results corrupted: {len(corrupted)}" + "".join(f"\n  {p}" for p in corrupted))
    return 1 if lost or corrupted else 0


class Killer:
    """SIGKILLs one process of a measuring job every 2-8 s, until its budget is spent."""

    def __init__(self, rng: random.Random, budget: int):
        self.rng, self.sent = rng, 0
        self.budget = {kind: budget // len(KINDS) + (i < budget % len(KINDS))
                       for i, kind in enumerate(KINDS)}
        self.by_kind = dict.fromkeys(KINDS, 0)
        self.loader_kills: list[tuple[str, float]] = []  # (cell, Unix time)
        self.log: list[str] = []

    @property
    def left(self) -> int:
        return sum(self.budget.values())

    def run(self, snakemake: subprocess.Popen) -> None:
        while self.left and snakemake.poll() is None:
            time.sleep(self.rng.uniform(2, 8))
            targets = _targets(snakemake.pid)
            kinds = [kind for kind in KINDS if targets[kind] and self.budget[kind]]
            if not kinds or snakemake.poll() is not None:
                continue
            kind = self.rng.choice(kinds)
            cell, process = self.rng.choice(targets[kind])
            try:
                process.kill()
            except psutil.Error:
                continue
            self.budget[kind] -= 1
            self.sent += 1
            self.by_kind[kind] += 1
            if kind == "loader":
                self.loader_kills.append((cell, time.time()))
            self.log.append(f"{kind}: {cell.removeprefix('training_')}")


def _targets(snakemake: int) -> dict[str, list[tuple[str, psutil.Process]]]:
    """The processes of this Snakemake's measuring `dlbench run` jobs (never another's) by
    kind, each with its cell: the supervisor, its measuring child (a fork: the same
    command line) and that child's loader workers (forks too)."""
    targets = {kind: [] for kind in KINDS}
    try:
        processes = psutil.Process(snakemake).children(recursive=True)
    except psutil.Error:
        return targets
    for process in processes:
        try:
            cmdline = process.cmdline()
        except psutil.Error:
            continue
        if cmdline[1:4] != ["-m", "dlbench", "run"] or "--out" not in cmdline:
            continue
        cell = Path(cmdline[cmdline.index("--out") + 1]).stem
        try:
            depth = sum(1 for parent in process.parents() if parent.cmdline() == cmdline)
        except psutil.Error:
            continue
        try:  # a job is a target once it measures (not while it waits for the device)
            measuring = depth > 0 or bool(process.children())
        except psutil.Error:
            continue
        if depth < len(KINDS) and measuring:
            targets[KINDS[depth]].append((cell, process))
    return targets


def _read_all(workdir: Path) -> tuple[dict[str, dict], list[str]]:
    """Every result (validated), and the problems of any file that is not whole."""
    records, problems = {}, []
    for folder in ("runs", "failed"):
        for path in (workdir / "results" / folder).glob("*.json"):
            try:
                record = result.read(path)
            except result.ResultError as exc:
                problems.append(str(exc))
                continue
            if folder == "runs":
                records[path.stem] = record
    leftovers = [p for p in (workdir / "results").rglob("*")
                 if p.name.endswith((".tmp", ".child")) and p.is_file()]
    problems += [f"{p}: left behind" for p in leftovers]
    return records, problems


def _unnoticed(cell: str, record: dict, loader_kills: list[tuple[str, float]]) -> list[str]:
    """An ok result whose process had a loader worker killed during its training loop."""
    start = datetime.fromisoformat(record["started_at"]).timestamp()
    loop_end = start + record["startup"].get("timed_loop_end_s", 0)
    return [f"{cell}: ok although a loader worker was killed {at - start:.1f} s into it"
            for killed, at in loader_kills if killed == cell and start < at < loop_end]


def _summary_problems(workdir: Path, cells: set[str]) -> list[str]:
    path = workdir / "results" / "summary.parquet"
    if not path.exists():
        return [f"{path}: missing"]
    rows = list(pd.read_parquet(path)["cell_id"])
    if sorted(rows) != sorted(cells):
        return [f"summary: {len(rows)} rows for {len(cells)} cells "
                f"({json.dumps(sorted(set(rows) ^ cells))})"]
    return []


if __name__ == "__main__":
    sys.exit(main())
