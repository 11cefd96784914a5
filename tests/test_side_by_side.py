"""measurement.process: side_by_side - every recipe's group of one model measured by one
job, their processes taking turns at the CPU and timing in alternating slices
(dlbench.run.side_by_side, dlbench.measure.turns)."""

import json
import os
import statistics
import subprocess
import sys
import time
from functools import partial
from itertools import pairwise

import pandas as pd
import pytest
import yaml

from dlbench.analysis import startup
from dlbench.catalogue import frameworks
from dlbench.measure.timing import PhaseClock
from dlbench.plan import config
from dlbench.plan.jobs import job_args
from dlbench.plan.matrix import expand_cells
from dlbench.plan.rounds import units
from dlbench.records import aggregate, result
from dlbench.run import cell as measuring
from dlbench.run import side_by_side
from dlbench.run.side_by_side import Coordinator
from tests.conftest import REPO, snakemake, start_from, tiny_config, tool_env

PROFILE = ["--workflow-profile", str(REPO / "workflow" / "profiles" / "default")]


class Sides:
    """A coordinator over pipes whose other ends the test holds: each side's requests
    written by hand, its grants read back."""

    def __init__(self, count: int, startups: int = 1):
        self.to_sides = [os.pipe() for _ in range(count)]
        self.from_sides = [os.pipe() for _ in range(count)]
        for read, _ in self.to_sides:
            os.set_blocking(read, False)
        self.coordinator = Coordinator([w for _, w in self.to_sides],
                                       [r for r, _ in self.from_sides], startups)

    def ask(self, side: int, message: str) -> None:
        os.write(self.from_sides[side][1], message.encode() + b"\n")
        self.coordinator._read(side)

    def granted_now(self) -> list[int]:
        """The sides the coordinator grants a turn to now."""
        self.coordinator._grant()
        sides = []
        for side, (read, _) in enumerate(self.to_sides):
            try:
                if os.read(read, 1) == b"G":
                    sides.append(side)
            except BlockingIOError:
                pass
        return sides

    def granted(self) -> int | None:
        """The one side the coordinator grants the CPU to now, if it grants it to any."""
        sides = self.granted_now()
        assert len(sides) <= 1, sides
        return sides[0] if sides else None

    def close(self) -> None:
        for pair in self.to_sides + self.from_sides:
            for fd in pair:
                os.close(fd)


def test_work_goes_first_then_timed_slices_alternate_a_b_c_then_c_b_a():
    sides = Sides(3)
    try:
        sides.ask(0, "W")
        assert sides.granted() == 0
        sides.ask(1, "W")
        assert sides.granted() is None  # one side at a time: 0 still holds the CPU
        sides.ask(0, "T 0")  # 0 is ready to time; 1 and 2 still have work
        assert sides.granted() == 1
        sides.ask(1, "T 0")
        assert sides.granted() is None  # 2 has not asked yet: it will have work first
        sides.ask(2, "W")
        assert sides.granted() == 2
        sides.ask(2, "T 0")
        order = []
        for _ in range(6):
            side = sides.granted()
            order.append(side)
            sides.ask(side, "T 0")
        assert order == [0, 1, 2, 2, 1, 0]
        # A side done with the first sizes waits at the next until every side is.
        sides.ask(sides.granted(), "T 1")  # 0 ended its loop of position 0
        assert sides.granted() == 1
        sides.ask(1, "W")  # 1 ended its loop: its checks, then its next sizes
        assert sides.granted() == 1
        sides.ask(1, "T 1")
        assert sides.granted() == 2  # position 0 first: 2 is still timing it
        sides.ask(2, "T 1")
        # Every side at the next sizes: their slices go on in turn, the next pass reversed.
        order = []
        for _ in range(3):
            order.append(sides.granted())
            sides.ask(order[-1], "T 1")
        assert order == [2, 1, 0]
    finally:
        sides.close()


def test_start_ups_run_beside_each_other_and_nothing_else_beside_them():
    """Two start-ups at once (two CPUs): the third waits for one of them to end; work
    after a start-up (compiling, warm-up) waits for every start-up to end, and runs
    alone; a timed slice waits for all work."""
    sides = Sides(3, startups=2)
    try:
        for side in range(3):
            sides.ask(side, "S")
        assert sides.granted_now() == [0, 1]
        sides.ask(0, "W")  # 0's model is built: its compiling waits for 1's start-up
        assert sides.granted_now() == [2]  # a start-up goes beside the other start-up
        sides.ask(1, "T 0")
        assert sides.granted_now() == []  # 2 still starts up: 0 may not work beside it
        sides.ask(2, "W")
        assert sides.granted_now() == [0]
        assert sides.granted_now() == []  # 0 compiles alone; 2 waits for it
        sides.ask(0, "T 0")
        assert sides.granted_now() == [2]
        sides.ask(2, "T 0")
        assert sides.granted_now() == [0]  # one slice at a time, the first pass A B C
        # 1's measuring process died and its side starts another: not beside a slice.
        sides.ask(1, "S")
        assert sides.granted_now() == []
        sides.ask(0, "T 0")
        assert sides.granted_now() == [1]
    finally:
        sides.close()


def test_one_start_up_at_a_time_when_asked():
    sides = Sides(2, startups=1)
    try:
        sides.ask(0, "S")
        sides.ask(1, "S")
        assert sides.granted_now() == [0]
        sides.ask(0, "W")
        assert sides.granted_now() == [1]
    finally:
        sides.close()


def test_the_wait_after_a_start_up_is_left_out_of_the_later_marks(monkeypatch):
    """A process's start-up ends at its first mark after the imports; its wait for the CPU
    to itself then (5 s here) counts in none of its later marks."""
    class Baton:
        asked = 0

        def started(self) -> float:
            self.asked += 1
            return 5.0 if self.asked == 1 else 0.0  # only a start-up's end waits

    baton = Baton()
    monkeypatch.setattr(measuring, "BATON", baton)
    clock = PhaseClock(time.time() - 10)
    clock.on_mark = partial(measuring._on_mark, None, clock)
    clock.mark("imports_done_s")
    assert baton.asked == 0  # the imports are part of the start-up
    clock.mark("model_built_s")
    clock.mark("model_ready_s")
    assert baton.asked == 2
    assert clock.marks["model_ready_s"] == pytest.approx(
        clock.marks["model_built_s"] - 5.0, abs=0.5)


def test_the_report_reads_how_many_start_ups_ran_at_once():
    cells = pd.DataFrame({"process_side_by_side_sides": [3, 3, None],
                          "process_side_by_side_startups": [2, 2, None]})
    assert startup.most_startups_at_once(cells) == 2
    # Records from before start-ups ran at once: one at a time; none side by side: 0.
    assert startup.most_startups_at_once(cells.drop(
        columns="process_side_by_side_startups")) == 1
    assert startup.most_startups_at_once(pd.DataFrame({"median_ms": [1.0]})) == 0


def test_a_side_that_ends_passes_its_turn():
    sides = Sides(2)
    try:
        sides.ask(0, "W")
        sides.ask(1, "T 0")
        assert sides.granted() == 0
        sides.coordinator._ended(0)  # its supervisor exited while it held the CPU
        assert sides.granted() == 1
    finally:
        sides.close()


def test_a_side_by_side_job_measures_every_recipe_of_a_model():
    matrix = config.validate(tiny_config(
        frameworks=["pytorch", "tensorflow"], models=["tiny-bert"], batch_sizes=[1, 2],
        devices=["cpu", "gpu"], measurement={"process": "side_by_side"}))
    jobs = units(expand_cells(matrix), "side_by_side")
    # One job for the CPU's cells; a GPU's groups one by one, as per_group measures them.
    gpu = {key for key, cells in jobs.items() if cells[0].device == "gpu"}
    assert set(jobs) - gpu == {"inference_tiny-bert_cpu"}
    assert gpu and all(len({(c.framework, c.optimization) for c in jobs[key]}) == 1
                       for key in gpu)
    cells = jobs["inference_tiny-bert_cpu"]
    args = job_args(cells, True, matrix)
    assert "--beside" in args
    beside = args[args.index("--beside") + 1:]
    recipes = {f"{c.framework}:{c.optimization}" for c in cells}
    first = f"{cells[0].framework}:{cells[0].optimization}"
    assert set(beside[:len(recipes) - 1]) == recipes - {first}


def run_side_by_side(tmp_path, recipes: list[str], fault: str = "", *extra: str):
    """`dlbench run` of tiny-bert at two batch sizes, its recipes side by side."""
    framework, optimization = recipes[0].split(":")
    env = tool_env(DLBENCH_TEST_FAULT=fault)
    env.pop(side_by_side.STARTUPS, None)  # one per CPU, whatever the shell asks
    done = subprocess.run(
        [sys.executable, "-m", "dlbench", "run", f"--framework={framework}",
         f"--optimization={optimization}", "--beside", *recipes[1:], "--model=tiny-bert",
         "--device=cpu", "--batch", "1", "2", "--seqlen", "8", "--warmup-iterations=1",
         "--min-duration-s=1", "--min-iterations=6", f"--out-dir={tmp_path / 'runs'}", *extra],
        capture_output=True, text=True, timeout=600, env=env)
    records = {p.stem: result.read(p) for p in (tmp_path / "runs").glob("*.json")}
    return done, records


@pytest.mark.slow
def test_recipes_take_turns_and_a_planted_slower_one_comes_out_slower(tmp_path):
    slow = "pytorch_tiny-bert_cpu_b\\d_s8_eager"
    done, records = run_side_by_side(
        tmp_path, ["pytorch:eager", "pytorch:torchscript", "jax:jit"], fault=f"slow@{slow}")
    assert done.returncode == 0, done.stderr[-3000:]
    assert len(records) == 6 and all(r["status"] == "ok" for r in records.values())
    slices = sorted((s["started_at"], s["started_at"] + s["seconds"], r["params"]["batch"],
                     r["params"]["optimization"], s["median_ms"])
                    for r in records.values() for s in r["timing"]["slices"])
    # Every turn at a timed slice, those dropped for the host's stealing included.
    taken = sorted((s["started_at"], s["started_at"] + s["seconds"], r["params"]["batch"],
                    r["params"]["optimization"]) for r in records.values()
                   for s in r["timing"]["slices"] + r["timing"]["stolen_slices"])
    # Never two processes at once: no slice overlaps the next.
    assert all(a[1] <= b[0] for a, b in pairwise(taken))
    # The processes' start-ups (from their first turn until their model was built) ran
    # up to one per CPU at once (three sides), and beside no slice.
    at_once = min(len(os.sched_getaffinity(0)), 3)
    assert all(r["process"]["side_by_side"]["startups"] == at_once for r in records.values())
    starts = sorted((up["began_at"], up["ended_at"]) for r in records.values()
                    if (up := r["process"]["side_by_side"].get("start_up")))
    assert len(starts) == 3  # no retries: one process a side
    assert not any(a < end and start < b for a, b, *_ in taken for start, end in starts)
    overlapping = any(b[0] < a[1] for a, b in pairwise(starts))
    assert overlapping == (at_once > 1), starts
    for record in records.values():
        assert record["process"]["side_by_side"]["sides"] == 3
        assert len(record["timing"]["slices"]) >= 2
        # The utilization is the loop's own slices' (at 100 Hz), not the others' turns.
        own_s = sum(s["seconds"] for s in record["timing"]["slices"])
        assert record["utilization"]["samples"] <= 100 * own_s + 10, record["utilization"]
    for batch in (1, 2):
        recipes = [s[3] for s in taken if s[2] == batch]
        # Every recipe times a slice before any times its second: the turns go round.
        assert len(set(recipes[:3])) == 3 and recipes[3:6] == recipes[:3][::-1]
        # The planted side: each of its slices slower than the other recipes' beside it
        # by about the 2 ms it spins more.
        by_slice = [(s[3], s[4]) for s in slices if s[2] == batch]
        for (a, a_ms), (b, b_ms) in pairwise(by_slice):
            if "eager" in (a, b) and a != b:
                eager, other = (a_ms, b_ms) if a == "eager" else (b_ms, a_ms)
                assert eager > other + 1.5, by_slice


@pytest.mark.slow
def test_a_stolen_slice_is_timed_again_and_a_host_that_keeps_stealing_is_flagged(tmp_path):
    """A burst of steal (planted: the host took all of a loop's first slice) costs the cell
    that slice, timed again at a later turn beside the others; a host that steals every
    slice leaves the cell's slices stolen after RETIMED tries, and the cell flagged."""
    from dlbench.measure.timing import Slices

    burst, always = "pytorch_tiny-bert_cpu_b1_s8_eager", "pytorch_tiny-bert_cpu_b1_s8_torchscript"
    done, records = run_side_by_side(tmp_path, ["pytorch:eager", "pytorch:torchscript"],
                                     f"stolen@{burst}", "--retry-noisy=1")
    assert done.returncode == 0, done.stderr[-3000:]
    timing = records[burst]["timing"]
    planted = timing["stolen_slices"][0]
    assert planted["steal_fraction"] == 1.0 and planted["iterations"] >= 1
    assert planted["started_at"] < min(s["started_at"] for s in timing["slices"])
    # Its iterations are gone from the samples; the kept slices' are all there are, and
    # they alone make up the loop's time (min_duration_s: 1 s).
    assert timing["iterations"] == sum(s["iterations"] for s in timing["slices"])
    assert timing["iterations"] == len(timing["samples_ms"]) >= 6
    assert sum(s["seconds"] for s in timing["slices"]) >= 1.0
    # Not flagged for steal, so not measured again in a fresh process: unless the host
    # really stole from RETIMED slices more here (then stolen slices were kept, as below).
    if len(timing["stolen_slices"]) < Slices.RETIMED:
        assert not records[burst]["flags"].get("noisy_machine"), records[burst]["flags"]
        assert not any("stolen" in flag for attempt in records[burst].get("attempts", [])
                       for flag in attempt["flags"])
    # The run's summary takes cells with and without stolen slices (the per-slice details
    # are the records', not the summary's columns).
    summary = aggregate.summarize(sorted((tmp_path / "runs").glob("*.json")))
    summary.to_parquet(tmp_path / "summary.parquet", index=False)
    assert "stolen_slices" not in summary and len(summary) == 4

    done, records = run_side_by_side(tmp_path / "always", ["pytorch:eager",
                                                           "pytorch:torchscript"],
                                     f"stolen-always@{always}", "--retry-noisy=1")
    assert done.returncode == 0, done.stderr[-3000:]
    record = records[always]
    assert len(record["timing"]["stolen_slices"]) == Slices.RETIMED
    assert all(s["steal_fraction"] == 1.0 for s in record["timing"]["slices"])
    assert record["utilization"]["steal_fraction"] == 1.0
    assert "noisy machine" in " ".join(record["flags"]["reasons"]), record["flags"]
    # retry_noisy measured it again in a fresh process: stolen again, and kept flagged.
    assert [a["kept"] for a in record.get("attempts", [])] in ([True, False], [False, True])


@pytest.mark.slow
def test_a_side_that_crashes_costs_only_its_cell(tmp_path):
    crash = "pytorch_tiny-bert_cpu_b1_s8_torchscript"
    done, records = run_side_by_side(tmp_path, ["pytorch:eager", "pytorch:torchscript"],
                                     fault=f"crash@{crash}")
    assert done.returncode == 0, done.stderr[-3000:]
    assert records[crash]["status"] == "error" and "crashed" in records[crash]["reason"]
    others = {k: r["status"] for k, r in records.items() if k != crash}
    assert others == dict.fromkeys(others, "ok") and len(others) == 3
    # Its next cell was measured by a fresh process of its side, still taking turns.
    after = records["pytorch_tiny-bert_cpu_b2_s8_torchscript"]
    assert after["process"]["side_by_side"]["sides"] == 2


def test_beside_needs_an_out_dir_and_known_recipes(tmp_path):
    common = [sys.executable, "-m", "dlbench", "run", "--framework=pytorch",
              "--optimization=eager", "--model=tiny-bert", "--device=cpu", "--batch=1",
              "--seqlen=8"]
    for extra, says in (
            (["--beside", "jax:jit", f"--out={tmp_path / 'a.json'}"], "--out-dir"),
            (["--beside", "jax", f"--out-dir={tmp_path}"], "FRAMEWORK:OPTIMIZATION"),
            (["--beside", "pytorch:eager", f"--out-dir={tmp_path}"], "twice")):
        done = subprocess.run(common + extra, capture_output=True, text=True, timeout=120,
                              env=tool_env())
        assert done.returncode != 0 and says in done.stderr, done.stderr[-1000:]


@pytest.mark.slow
def test_the_workflow_measures_a_model_side_by_side_in_rounds(tmp_path, measured_once):
    """Each scenario that groups sizes, side by side in a job of its own (a rule per
    scenario): inference's recipes of tiny-bert, generation's of tiny-gpt2."""
    matrix = tiny_config(frameworks=["pytorch", "jax"], models=["tiny-bert"],
                         batch_sizes=[1], optimizations=["eager", "jit"], devices=["cpu"],
                         measurement={"process": "side_by_side", "rounds": 2},
                         generation={"models": ["tiny-gpt2"], "batch_sizes": [1],
                                     "prompt_lengths": [8], "new_tokens": [4],
                                     "optimizations": {"pytorch": ["eager"], "jax": ["jit"]}})
    start_from(measured_once, tmp_path)
    run = snakemake(tmp_path, matrix, *PROFILE, "--cores", "2")
    assert run.returncode == 0, run.stderr[-3000:]
    summary = pd.read_parquet(tmp_path / "results" / "summary.parquet")
    cells = expand_cells(config.validate(matrix))
    assert sorted(summary["cell_id"]) == sorted(c.id for c in cells)
    for unit in ("inference_tiny-bert_cpu", "generation_tiny-gpt2_cpu"):
        assert (tmp_path / "logs" / "groups" / f"{unit}.log").exists(), unit
        assert (tmp_path / "logs" / "rounds" / "r0" / f"{unit}.log").exists(), unit
    # inference: PyTorch eager, JAX eager and jit; generation: PyTorch eager, JAX jit
    timed = summary[summary["status"] == "ok"]
    sides = {"inference": 3, "generation": 2}
    assert sorted(timed["scenario"]) == sorted(name for name, n in sides.items()
                                               for _ in range(n))
    for cell_id, scenario in zip(timed["cell_id"], timed["scenario"], strict=True):
        record = json.loads((tmp_path / "results" / "runs" / f"{cell_id}.json").read_text())
        assert record["timing"]["rounds"]["count"] == 2
        assert record["process"]["side_by_side"]["sides"] == sides[scenario]  # one size
        assert record["timing"]["slices"], cell_id  # timed in turns
        if scenario == "generation":  # token for token, its reference read from the folder
            assert record["correctness"]["share_equal"] == 1.0, cell_id
            assert record["settings"]["reference"].endswith(
                "tiny-gpt2/generation_b1_p8_n4.npz")
    assert statistics.mean(timed["median_ms"]) > 0
    # The report names how they were measured: side by side, not one recipe at a time.
    report = (tmp_path / "report" / "report.html").read_text()
    assert f"{len(timed)} of the {len(timed)} timed cells were measured side by side" in report
    assert "measured in groups" not in report
    # and how their start-ups shared the machine, in the sentence and under the start-up
    # figures that it bears on.
    cpus = len(os.sched_getaffinity(0))
    if cpus > 1:
        assert f"their start-ups (imports, building the model) up to {cpus} at once" in report
        assert f"up to {cpus} processes started up at once" in report


def test_the_side_by_side_environment_holds_every_frameworks_packages():
    """Under --use-conda a side-by-side job runs every framework in envs/side_by_side.yaml:
    every registered framework's pins, as its own environment pins them, and no other."""
    def pins(path) -> set[str]:
        environment = yaml.safe_load((REPO / path).read_text())
        return set(next(d["pip"] for d in environment["dependencies"] if isinstance(d, dict)))

    wanted = set().union(*(pins(frameworks.get(name).environment)
                           for name in frameworks.REGISTERED))
    assert pins("envs/side_by_side.yaml") == wanted
    # One version of each package: the frameworks' environments agree on the ones they share.
    packages = [pin.split("==")[0] for pin in wanted if "==" in pin]
    assert len(packages) == len(set(packages)), sorted(packages)
