"""`dlbench compare --interleave A B`: measure two sides alternately, so that the machine's
drift falls on both alike.

A side is a checkout (a folder with its own Snakefile and src/, e.g. a git worktree of
another commit; run with --configfile, else its own config/config.yaml) or a config file
(run with this checkout). Each side's workflow builds its shared inputs (weights,
references, data sets) in `<work>/<side>/`, and names its measuring jobs' `dlbench run`
command lines (Snakemake's dry run): exactly the commands that side's workflow would run.
Then, job by job, the two sides' commands run in fresh processes, alternately for `rounds`
rounds — A B, then B A, … (A B B A A B …) — each round's records kept in
`<work>/<side>/rounds/<r>/`. The rounds of a cell are combined as repeats (the scenario's
`combine`, in round order) into `<work>/<side>/interleaved/runs/<cell>.json`, beside an
`interleave.json` that says which run and side it is: two such folders of one run are
compared round by round (dlbench.analysis.compare's paired test).
"""

import json
import os
import shlex
import shutil
import subprocess
import sys
import uuid
from dataclasses import dataclass
from pathlib import Path

from dlbench import REPO_ROOT
from dlbench.files import atomic, paths
from dlbench.records import result

SIDES = ("baseline", "new")
MARKER = "interleave.json"
RESULTS = "interleaved"


class InterleaveError(RuntimeError):
    """A side that cannot be run; the message says which and why."""


@dataclass(frozen=True)
class Side:
    name: str  # baseline or new
    source: Path  # the checkout or config file given
    snakefile: Path
    configfile: Path | None
    work: Path  # Snakemake's working directory for this side

    @property
    def results(self) -> Path:
        return self.work / RESULTS


@dataclass(frozen=True)
class Job:
    """One measuring job of a side: its cells and its `dlbench run` command (argv, the
    environment it sets, the outputs to redirect)."""

    cells: tuple[str, ...]
    env: dict[str, str]
    argv: list[str]


def side(name: str, source: Path, configfile: Path | None, work: Path) -> Side:
    source = Path(source).resolve()
    if source.is_dir():
        if not (source / "Snakefile").is_file():
            raise InterleaveError(f"{source}: a folder without a Snakefile; give a checkout "
                                  "of dlbench or a config file")
        return Side(name, source, source / "Snakefile", configfile, work / name)
    if not source.is_file():
        raise InterleaveError(f"{source}: no such checkout or config file")
    return Side(name, source, REPO_ROOT / "Snakefile", source, work / name)


def snakemake(side: Side, *args: str) -> subprocess.CompletedProcess:
    # The targets and flags first: --configfile takes every word after it.
    command = [str(Path(sys.executable).parent / "snakemake"), *args, "--snakefile",
               str(side.snakefile), "--directory", str(side.work), "--cores", "1"]
    if side.configfile is not None:
        command += ["--configfile", str(side.configfile.resolve())]
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        raise InterleaveError(f"{side.name} ({side.source}): snakemake failed:\n"
                              + (done.stderr or done.stdout)[-3000:])
    return done


def prepare(side: Side) -> list[Job]:
    """Build the side's shared inputs; its measuring jobs, as its workflow runs them."""
    side.work.mkdir(parents=True, exist_ok=True)
    plan = snakemake(side, "--dry-run", "--forceall", "--printshellcmds").stdout
    jobs, inputs = [], []
    for block in plan.split("\n\n"):
        fields = dict(line.strip().split(": ", 1) for line in block.splitlines()
                      if ": " in line and not line.startswith("["))
        command = fields.get("Shell command", "")
        if " -m dlbench run " not in command:
            continue
        outputs = fields["output"].split(", ")
        if any(o.startswith(f"{paths.ROUNDS}/") for o in outputs):
            continue  # a side's own rounds: the interleaving's rounds take their place
        inputs += [p for p in fields.get("input", "").split(", ")
                   if p and not p.startswith(f"{paths.ROUNDS}/") and not p.startswith(
                       f"{paths.RUNS}/")]
        jobs.append(_job(command, tuple(Path(o).stem for o in outputs)))
    if not jobs:
        raise InterleaveError(f"{side.name} ({side.source}): its workflow measures no cell")
    if inputs:
        snakemake(side, *dict.fromkeys(inputs))
    return jobs


def _job(command: str, cells: tuple[str, ...]) -> Job:
    """The command line as argv: the leading VAR=value words are its environment, and it
    ends where its output is redirected; a side measured in rounds (measurement.rounds)
    has its job run as one round of its own (the interleaving makes the rounds)."""
    words = shlex.split(command)
    words = words[:words.index(">")] if ">" in words else words
    words = [w for w in words if not w.startswith(("--round=", "--rounds-dir="))]
    env = {}
    while words and "=" in words[0] and not words[0].startswith("-"):
        key, value = words.pop(0).split("=", 1)
        env[key] = value
    return Job(cells, env, words)


def _redirected(job: Job, folder: Path) -> list[str]:
    """The job's argv writing its records under folder (runs/, failed/) instead."""
    argv, out = [], iter(job.argv)
    for word in out:
        if word in ("--out", "--failed-out", "--out-dir"):
            value = Path(next(out))
            place = folder / (paths.FAILED_NAME if word == "--failed-out" else paths.RUNS_NAME)
            argv += [word, str(place if word == "--out-dir" else place / value.name)]
        elif word.startswith(("--out=", "--failed-out=", "--out-dir=")):
            raise InterleaveError(f"unexpected form of {word!r} in a workflow's command")
        else:
            argv.append(word)
    return argv


def run(baseline: Path, new: Path, work: Path, rounds: int,
        configfile: Path | None = None, log=print) -> tuple[Path, Path]:
    """Measure both sides interleaved; the two result folders to compare."""
    sides = [side(name, source, configfile, Path(work).resolve())
             for name, source in zip(SIDES, (baseline, new), strict=True)]
    plans = {}
    for one in sides:
        log(f"{one.name}: {one.source}: building its inputs")
        plans[one.name] = {job.cells: job for job in prepare(one)}
        shutil.rmtree(one.work / "rounds", ignore_errors=True)  # an earlier run's
    units = list(dict.fromkeys([*plans["baseline"], *plans["new"]]))
    for i, cells in enumerate(units, 1):
        for r in range(rounds):
            order = sides if r % 2 == 0 else sides[::-1]  # A B, B A, A B, …
            for one in order:
                job = plans[one.name].get(cells)
                if job is None:
                    continue
                log(f"[{i}/{len(units)}] round {r + 1}/{rounds} {one.name}: "
                    + ", ".join(cells))
                folder = one.work / "rounds" / str(r)
                done = subprocess.run(_redirected(job, folder), cwd=one.work,
                                      env={**os.environ, **job.env},
                                      capture_output=True, text=True)
                written = folder / paths.RUNS_NAME / f"{cells[0]}.json"
                if done.returncode != 0 and not written.exists():
                    raise InterleaveError(f"{one.name}: {' '.join(cells)} failed:\n"
                                          + (done.stderr or done.stdout)[-3000:])
    run_id = uuid.uuid4().hex
    for one in sides:
        combine(one, rounds, run_id)
    return sides[0].results, sides[1].results


def combine(one: Side, rounds: int, run_id: str) -> None:
    """Each cell's rounds as one record with repeats (in round order); a cell not ok in
    some round keeps that round's record (its status and reason)."""
    from dlbench.plan.matrix import Cell

    out = one.results / paths.RUNS_NAME
    out.mkdir(parents=True, exist_ok=True)
    for old in out.glob("*.json"):
        old.unlink()  # an earlier interleaved run's cells are not this run's
    names = sorted({p.name for r in range(rounds)
                    for p in (one.work / "rounds" / str(r) / paths.RUNS_NAME).glob("*.json")})
    for name in names:
        records = [result.read(one.work / "rounds" / str(r) / paths.RUNS_NAME / name)
                   for r in range(rounds)
                   if (one.work / "rounds" / str(r) / paths.RUNS_NAME / name).is_file()]
        failed = [r for r in records if r["status"] != "ok"]
        record = failed[0] if failed or len(records) < rounds else \
            Cell.from_params(records[0]["params"]).spec.combine(records)
        atomic.write_json_atomic(out / name, record)
    marker = {"run": run_id, "side": one.name, "source": str(one.source),
              "configfile": str(one.configfile) if one.configfile else None,
              "rounds": rounds, "order": "A B, then B A, alternately (A B B A …)"}
    atomic.write_json_atomic(one.results / MARKER, marker)


def interleaved(baseline: Path, new: Path) -> bool:
    """Whether two result folders are the two sides of one interleaved run."""
    markers = [Path(p) / MARKER for p in (baseline, new)]
    if not all(m.is_file() for m in markers):
        return False
    a, b = (json.loads(m.read_text()) for m in markers)
    return a["run"] == b["run"] and a["side"] != b["side"]
