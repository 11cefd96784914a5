"""measurement.process: per_group - one process measures a group of cells (every batch ×
length of a framework, model, device and optimization), writing one result per cell."""

import importlib.util
import subprocess
import sys
import time

import pandas as pd
import pytest

from dlbench.plan import config
from dlbench.plan.matrix import expand_cells
from dlbench.records import result
from tests.conftest import REPO, snakemake, start_from, tiny_config, tool_env

PROFILE = ["--workflow-profile", str(REPO / "workflow" / "profiles" / "default")]
FAST = ["--warmup-iterations=1", "--min-duration-s=0.05", "--min-iterations=3"]


def run_group(tmp_path, *args: str, fault: str = "", **env: str):
    """`dlbench run` of pytorch tiny-bert on the CPU for several batch sizes and lengths."""
    done = subprocess.run(
        [sys.executable, "-m", "dlbench", "run", "--framework=pytorch", "--model=tiny-bert",
         "--device=cpu", *args, f"--out-dir={tmp_path / 'runs'}"],
        capture_output=True, text=True, timeout=300,
        env=tool_env(DLBENCH_TEST_FAULT=fault, **env),
    )
    records = {p.stem: result.read(p) for p in (tmp_path / "runs").glob("*.json")}
    return done, records


def test_group_writes_one_result_per_cell_from_one_process(tmp_path):
    # A loop long enough for the CPU counters, sampled at 10 Hz, to describe it.
    done, records = run_group(tmp_path, "--optimization=eager", "--batch", "1", "2",
                              "--seqlen", "8", "128", *FAST, "--min-duration-s=0.4")
    assert done.returncode == 0, done.stderr
    statuses = {cell: r["status"] for cell, r in records.items()}
    assert statuses == {
        "pytorch_tiny-bert_cpu_b1_s8_eager": "ok", "pytorch_tiny-bert_cpu_b2_s8_eager": "ok",
        # Beyond tiny-bert's 64 positions: recorded as such, never measured.
        "pytorch_tiny-bert_cpu_b1_s128_eager": "unsupported",
        "pytorch_tiny-bert_cpu_b2_s128_eager": "unsupported",
    }
    first, second = (records[f"pytorch_tiny-bert_cpu_b{b}_s8_eager"] for b in (1, 2))
    # The group's model is built by its first cell and used by the second.
    parent = first["process"].pop("warm_parent")  # the job's, so both cells' (warm.py)
    assert second["process"].pop("warm_parent") == parent
    assert first["process"] == {"cells": 2, "position": 0, "model_reused": False,
                                "compile_cache": "none"}  # not in rounds: each its own
    assert second["process"] == {"cells": 2, "position": 1, "model_reused": True,
                                 "compile_cache": "none"}
    assert "imports_done_s" in first["startup"]  # only the first cell paid the import
    assert "imports_done_s" not in second["startup"]
    # Peak memory is per cell: the second cell's counter was reset when it started.
    assert second["memory"]["rss_at_start_mb"] >= first["memory"]["rss_at_start_mb"]
    for record in (first, second):
        assert record["memory"]["peak_host_rss_mb"] >= record["memory"]["rss_at_start_mb"]
        assert record["utilization"]["samples"] >= 20  # memory, at ~100 Hz
        assert record["threads"]["intra_op"] == 2
    assert not list((tmp_path / "runs").glob(".*"))  # no child records left behind


@pytest.mark.slow
def test_group_compiles_each_shape_afresh(tmp_path):
    """torch.compile's caches are cleared between cells: the second shape is compiled
    from scratch, not as a recompilation (which would switch to dynamic shapes)."""
    done, records = run_group(tmp_path, "--optimization=compile", "--batch", "1", "2",
                              "--seqlen", "8", *FAST, TORCH_LOGS="recompiles")
    assert done.returncode == 0, done.stderr
    assert [r["status"] for r in records.values()] == ["ok", "ok"]
    assert "Recompiling function" not in done.stderr


@pytest.mark.slow
@pytest.mark.parametrize(("fault", "reason"), [
    ("crash", "crashed: the measuring process was killed by SIGSEGV"),
    ("hang", "timed out: still running after 15 s (measurement.timeout_s)"),
])
def test_a_failing_cell_costs_only_itself(tmp_path, fault, reason):
    """The child dies in the second of three cells: a fresh one measures the third, and
    the run succeeds (failing the job would make Snakemake delete the others). 15 s a
    cell: with 6, the first cell (its process's start-up included) once timed out too in
    a full suite run."""
    broken = "pytorch_tiny-bert_cpu_b2_s8_eager"
    done, records = run_group(tmp_path, "--optimization=eager", "--batch", "1", "2", "4",
                              "--seqlen", "8", "--timeout-s=15", *FAST,
                              fault=f"{fault}@{broken}")
    assert done.returncode == 0, done.stderr
    assert (records[broken]["status"], records[broken]["reason"]) == ("error", reason)
    after = records["pytorch_tiny-bert_cpu_b4_s8_eager"]
    assert records["pytorch_tiny-bert_cpu_b1_s8_eager"]["status"] == after["status"] == "ok"
    # Measured by a fresh process, which built its own model.
    after["process"].pop("warm_parent")
    assert after["process"] == {"cells": 1, "position": 0, "model_reused": False,
                                "compile_cache": "none"}
    assert not (tmp_path / "failed").exists()


def _bench_grouping():
    """bench/grouping.py, where grouped and isolated cells are timed side by side (a timing
    comparison is a measurement, not a test: issue 39)."""
    spec = importlib.util.spec_from_file_location("bench_grouping", REPO / "bench" /
                                                  "grouping.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_grouping_bench_tells_a_biased_group_from_bursts():
    """Its verdict on planted figures: bursts of a slow machine (a best time kept) agree;
    one cell far off, or every cell moved alike by 15% or more, does not."""
    disagrees = _bench_grouping().grouping_disagrees
    own = {"a": [1.0, 1.9, 0.9, 1.0], "b": [2.0, 2.1, 3.9, 1.9]}
    assert disagrees({"a": [0.95, 1.8], "b": [3.8, 2.0]}, own) == ""  # bursts
    assert "a: grouped" in disagrees({"a": [1.3, 1.4], "b": [2.0, 2.0]}, own)
    assert "best grouped" in disagrees({"a": [1.1, 1.2], "b": [2.3, 2.4]}, own)
    assert "best grouped" in disagrees({"a": [0.7, 0.8], "b": [1.5, 1.6]}, own)
    assert "grouped cells" in disagrees({"a": [1.0]}, own)


@pytest.mark.slow
def test_workflow_runs_one_job_per_group(tmp_path, measured_once):
    matrix = tiny_config(frameworks=["pytorch", "tensorflow"], models=["tiny-bert"],
                         devices=["cpu"], measurement={"process": "per_group"})
    start_from(measured_once, tmp_path)
    run = snakemake(tmp_path, matrix, *PROFILE, "--cores", "2")
    assert run.returncode == 0, run.stderr[-2000:]
    cells = expand_cells(config.validate(matrix))
    summary = pd.read_parquet(tmp_path / "results" / "summary.parquet")
    assert sorted(summary["cell_id"]) == sorted(c.id for c in cells)  # nothing lost
    logs = sorted(p.stem for p in (tmp_path / "logs" / "groups").glob("*.log"))
    assert logs == ["pytorch_tiny-bert_cpu_eager", "pytorch_tiny-bert_cpu_graph",
                    "tensorflow_tiny-bert_cpu_eager", "tensorflow_tiny-bert_cpu_graph"]
    measured = summary[summary["status"] == "ok"]
    assert len(measured) == 6 and set(measured["process_cells"]) == {2}  # 3 groups measure
    assert (tmp_path / "report" / "report.html").exists()


@pytest.mark.slow
def test_sigterm_stops_the_group_and_keeps_records_of_the_rest(tmp_path):
    """A cancelled job (SIGTERM, as from scancel or a time limit): no further cell starts,
    the job fails, and the cells it did not finish are kept as failed records."""
    hanging = "pytorch_tiny-bert_cpu_b2_s8_eager"
    runs, failed = tmp_path / "runs", tmp_path / "failed"
    process = subprocess.Popen(
        [sys.executable, "-m", "dlbench", "run", "--framework=pytorch", "--model=tiny-bert",
         "--device=cpu", "--optimization=eager", "--batch", "1", "2", "4", "--seqlen", "8",
         *FAST, f"--out-dir={runs}"],
        env=tool_env(DLBENCH_TEST_FAULT=f"hang@{hanging}"), stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, text=True)
    deadline = time.monotonic() + 120  # until the child has written its first cell's
    while not list(runs.glob(".*.child")) and time.monotonic() < deadline:  # record: the
        time.sleep(0.1)  # second cell hangs
    time.sleep(1)
    process.terminate()
    output, _ = process.communicate(timeout=60)
    assert process.returncode == 1, output
    assert result.read(runs / "pytorch_tiny-bert_cpu_b1_s8_eager.json")["status"] == "ok"
    stopped = result.read(failed / f"{hanging}.json")
    assert stopped["status"] == "error" and stopped["reason"].startswith("stopped: the job "
                                                                         "received SIGTERM")
    never = result.read(failed / "pytorch_tiny-bert_cpu_b4_s8_eager.json")
    assert never["reason"].startswith("not measured: the run was stopped before it")
    assert not (runs / f"{hanging}.json").exists()
