"""Side by side, start-ups at once against one at a time, alternately in one sitting (issue 38).

    .venv/bin/python bench/startups.py RUN OUT [--pairs N]

A side-by-side job starts every recipe's process of a model; their start-ups (imports,
building the model: work on one core, mostly) may run one per CPU at once
(dlbench.run.side_by_side.startups_at_once), or one at a time
(DLBENCH_STARTUPS_AT_ONCE=1). Here the default matrix's inference job (BERT base, 4
sizes, 7 recipes, one round, no retries), as the workflow runs it, with its references
from RUN (a finished run's folder: RUN/results/reference), the two ways alternately A B B
A …, each into a fresh folder OUT/<pair>-<way>. Per run: the job's wall, when its first
timed slice began, its slices' seconds, and per framework the median start-up figures of
its processes' first cells (imports done, model built, model ready, compile, in s since
the command's start, its waits for turns left out); per way, the median wall.

It reports, it does not decide.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path

WAYS = {"at once": None, "one at a time": "1"}
RECIPES = ["pytorch:eager", "pytorch:torchscript", "pytorch:onednn", "tensorflow:eager",
           "tensorflow:graph", "jax:eager", "jax:jit"]


def run(run_dir: Path, out: Path, startups: str | None) -> float:
    """The default's inference job into `out`; its wall in s."""
    reference = run_dir / "results" / "reference" / "bert-base-uncased"
    framework, optimization = RECIPES[0].split(":")
    env = {k: v for k, v in os.environ.items() if k != "DLBENCH_STARTUPS_AT_ONCE"}
    if startups:
        env["DLBENCH_STARTUPS_AT_ONCE"] = startups
    out.mkdir(parents=True)
    start = time.monotonic()
    with (out / "job.log").open("w") as log:
        subprocess.run(
            [sys.executable, "-m", "dlbench", "run", f"--framework={framework}",
             f"--optimization={optimization}", "--model=bert-base-uncased", "--device=cpu",
             "--batch", "1", "2", "--seqlen", "16", "64", "--beside", *RECIPES[1:],
             "--attention=eager", "--min-duration-s=1.5", "--min-iterations=6",
             "--retry-noisy=0", "--threads=2", "--warmup-iterations=2",
             f"--weights={reference / 'model.safetensors'}", f"--reference-dir={reference}",
             f"--out-dir={out / 'runs'}"], check=True, env=env, stdout=log,
            stderr=subprocess.STDOUT)
    return time.monotonic() - start


def figures(out: Path, wall: float) -> str:
    """A run's line: its wall, first slice, slices, and per framework its start-up."""
    records = [json.loads(p.read_text()) for p in (out / "runs").glob("*.json")]
    ok = [r for r in records if r["status"] == "ok"]
    slices = [s for r in ok for s in r["timing"]["slices"]]
    begun = min(datetime.fromisoformat(r["started_at"]).timestamp() for r in records)
    first_slice = min(s["started_at"] for s in slices) - begun
    line = (f"wall {wall:5.1f} s, first slice at {first_slice:4.1f} s, slices "
            f"{sum(s['seconds'] for s in slices):4.1f} s, {len(ok)}/{len(records)} ok")
    for framework in ("pytorch", "tensorflow", "jax"):
        firsts = [r for r in ok if r["params"]["framework"] == framework
                  and r["process"]["position"] == 0]
        marks = {key: statistics.median(r["startup"][key] for r in firsts
                                        if r["startup"].get(key) is not None)
                 for key in ("imports_done_s", "model_built_s", "model_ready_s")}
        compile_s = statistics.median(r["timing"]["compile_s"] for r in firsts)
        line += (f"\n    {framework:10} imports {marks['imports_done_s']:4.1f}, built "
                 f"{marks['model_built_s']:4.1f}, ready {marks['model_ready_s']:4.1f}, "
                 f"compile {compile_s:4.2f}")
    return line


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("run", type=Path, help="a finished run's folder (its references)")
    parser.add_argument("out", type=Path)
    parser.add_argument("--pairs", type=int, default=2)
    args = parser.parse_args()
    walls: dict[str, list[float]] = {way: [] for way in WAYS}
    for pair in range(args.pairs):
        for way in (list(WAYS) if pair % 2 == 0 else list(WAYS)[::-1]):
            out = args.out / f"{pair}-{way.replace(' ', '_')}"
            wall = run(args.run.resolve(), out, WAYS[way])
            walls[way].append(wall)
            print(f"{pair} {way:14} {figures(out, wall)}", flush=True)
    for way, seen in walls.items():
        print(f"{way:14} median wall {statistics.median(seen):.1f} s over {len(seen)} runs")


if __name__ == "__main__":
    main()
