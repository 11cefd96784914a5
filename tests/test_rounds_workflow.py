"""End to end: the real `snakemake` on a tiny matrix in two rounds (measurement.rounds),
as the default runs: every measuring job twice, in fresh processes, the second round in
the reverse order of the first; a training cell's seeds as its rounds; each cell's result
combining its rounds; the compilers' caches kept from the first round for the second; the
answer paired round by round; the run's share of measuring printed at its end; and a
result deleted measuring again its own job alone, not the rounds after it."""

import re

import pandas as pd
import pytest

from dlbench.analysis import headline
from dlbench.analysis.summary import load
from dlbench.records import result
from tests.conftest import REPO, snakemake, start_from

pytestmark = pytest.mark.slow  # end-to-end: `pytest -m "not slow"` skips it

PROFILE = ["--workflow-profile", str(REPO / "workflow" / "profiles" / "default")]
CONFIG = {
    "frameworks": ["pytorch", "jax"],
    "devices": ["cpu"],
    "inference": {"models": ["tiny-bert"], "batch_sizes": [1, 2], "sequence_lengths": [8],
                  "optimizations": {"pytorch": ["eager"], "jax": ["jit"]}},
    # JAX's training cell of an optimization it lacks: recorded without measuring, in one
    # job outside the rounds.
    "training": {"models": ["tiny-cnn"], "datasets": ["synthetic"], "batch_sizes": [32],
                 "pipelines": ["w0"], "optimizers": ["sgd"], "epochs": 1, "seeds": 2,
                 "breakdown": False, "ablation": False,
                 "optimizations": {"pytorch": ["eager"], "jax": ["eager"]}},
    "data": {"synthetic_train": 96, "synthetic_test": 32},
    "measurement": {"warmup_iterations": 1, "min_duration_s": 0.1, "min_iterations": 5,
                    "target_ci": 0, "quiet_wait_s": 0, "process": "per_group",
                    "rounds": 2},
}
INFERENCE = {"pytorch": "pytorch_tiny-bert_cpu_eager", "jax": "jax_tiny-bert_cpu_jit"}
TRAINING = {"pytorch": "training_pytorch_tiny-cnn_cpu_b32_synthetic_w0_sgd_eager"}
NOT_APPLICABLE = "training_jax_tiny-cnn_cpu_b32_synthetic_w0_sgd_eager"


@pytest.fixture(scope="module")
def rounds_run(tmp_path_factory, measured_once):
    workdir = start_from(measured_once, tmp_path_factory.mktemp("rounds-matrix"))
    run = snakemake(workdir, CONFIG, *PROFILE, "--cores", "2")
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    return workdir, run.stdout + run.stderr


def _measuring_jobs(log: str) -> list[tuple[str, int]]:
    """(unit, round) of each measuring job in the order Snakemake started them."""
    jobs = []
    for block in re.split(r"\n(?=(?:local)?rule \w+:)", log):
        rule = re.match(r"(?:local)?rule (\w+):", block)
        if not rule or not rule.group(1).startswith("measure_"):
            continue
        wildcards = dict(re.findall(r"(\w+)=([^,\s]+)", re.search(r"wildcards: (.*)",
                                                                   block).group(1)))
        unit = wildcards.get("cell") or f"{wildcards['head']}_{wildcards['tail']}"
        last = not rule.group(1).endswith("_round")
        jobs.append((unit, None if last else int(wildcards["round"])))
    return jobs


def test_each_round_runs_in_the_reverse_order_of_the_one_before(rounds_run):
    _, log = rounds_run
    jobs = _measuring_jobs(log)
    # The cell that only records why it cannot run: one job, in no round.
    assert (NOT_APPLICABLE, None) in jobs
    jobs.remove((NOT_APPLICABLE, None))
    units = [*INFERENCE.values(), *TRAINING.values()]
    assert sorted(unit for unit, _ in jobs) == sorted(units * 2)
    first = [unit for unit, r in jobs if r == 0]
    second = [unit for unit, r in jobs if r is None]  # the last round: the results
    assert jobs == [(unit, 0) for unit in first] + [(unit, None) for unit in second]
    assert second == first[::-1]
    # A scenario's units side by side, each round: inference first, then training.
    assert first == [INFERENCE["pytorch"], INFERENCE["jax"], TRAINING["pytorch"]]


def test_every_cell_combines_its_rounds_with_each_rounds_figures(rounds_run):
    workdir, _ = rounds_run
    runs = workdir / "results" / "runs"
    for framework in INFERENCE:
        cell = f"{framework}_tiny-bert_cpu_b1_s8_{'eager' if framework == 'pytorch' else 'jit'}"
        record = result.read(runs / f"{cell}.json")
        assert record["status"] == "ok", record["reason"]
        rounds = record["timing"]["rounds"]
        assert rounds["count"] == 2 and len(rounds["median_ms"]) == 2
        assert rounds["started_at"] == sorted(rounds["started_at"])
        assert record["timing"]["between_processes"]["processes"] == 2
        kept = result.read(workdir / "results" / "rounds" / "r0" / f"{cell}.json")
        assert kept["timing"]["median_ms"] == rounds["median_ms"][0]
        # The compilers' caches: emptied for the first round, kept for the second.
        assert kept["process"]["compile_cache"] == "empty"
        last = result.read(workdir / "results" / "rounds" / "r1" / f"{cell}.json")
        assert last["process"]["compile_cache"] == "kept"
    # A training cell's rounds are its seeds, one a round.
    for unit in TRAINING.values():
        record = result.read(runs / f"{unit}.json")
        assert record["status"] == "ok", record["reason"]
        assert record["training"]["seeds"] == [0, 1]
        assert len(record["timing"]["rounds"]["wall_step_ms"]) == 2


def test_the_answer_is_paired_round_by_round_and_the_share_is_printed(rounds_run):
    workdir, log = rounds_run
    answers = headline.winners(load(workdir / "results" / "summary.parquet"))
    by = answers["inference"]["by how much"]
    assert by.str.contains(", 2 rounds)", regex=False).all(), by.tolist()
    share = re.search(r"dlbench: this run took (.*) in the timed loops of (\d+) cells "
                      r"\((\d+)%\)", log)
    assert share and int(share.group(2)) == 5 and 0 < int(share.group(3)) < 100, log[-2000:]


def test_a_deleted_result_measures_its_own_job_again_and_no_other(rounds_run):
    workdir, _ = rounds_run
    cell = workdir / "results" / "runs" / "pytorch_tiny-bert_cpu_b2_s8_eager.json"
    cell.unlink()
    dry = snakemake(workdir, CONFIG, *PROFILE, "--cores", "2", "--dry-run")
    assert dry.returncode == 0, dry.stderr[-3000:]
    planned = pd.Series(re.findall(r"^(?:local)?rule (\w+):", dry.stdout, re.M))
    # Its group's last round (which combines the rounds again), then the summary and the
    # report; the job after it in the rounds waited for it once and not for its date.
    assert sorted(planned) == ["aggregate", "all", "measure_group", "report"], dry.stdout
