"""`dlbench run` on the tiny models in the real frameworks: one valid JSON per cell, and what
a cell records for fair comparisons (tests/test_fairness.py has the rest of those)."""

import copy
import json
import subprocess
import sys
import time

import pytest

from dlbench.records import result
from tests.conftest import tool_env

FAST = ["--warmup-iterations=1", "--min-duration-s=0.05", "--min-iterations=3"]


def run_cell(tmp_path, *args: str) -> dict:
    out = tmp_path / "cell.json"
    done = subprocess.run(
        [sys.executable, "-m", "dlbench", "run", *FAST, *args, f"--out={out}"],
        capture_output=True, text=True, timeout=300, env=tool_env(OMP_NUM_THREADS="1"),
    )
    assert done.returncode == 0, done.stderr
    record = json.loads(out.read_text())
    result.validate(record)
    return record


@pytest.fixture(scope="module")
def measured(tmp_path_factory):
    """One inference cell's record per (framework, model, optimization), batch 2 × 16
    tokens on 2 threads (the default), measured once for the tests of this module that
    read it."""
    records = {}

    def measure(framework: str, model: str, optimization: str) -> dict:
        key = (framework, model, optimization)
        if key not in records:
            folder = tmp_path_factory.mktemp(f"{framework}-{model}-{optimization}")
            records[key] = run_cell(folder, f"--framework={framework}", f"--model={model}",
                                    "--device=cpu", "--batch=2", "--seqlen=16",
                                    f"--optimization={optimization}", "--threads=2")
        return copy.deepcopy(records[key])  # a test's edits stay its own

    return measure


# test_every_cell_records_arithmetic_attention_memory_phases_and_builds reads three of these
# cells' records (one per framework) instead of measuring its own. The eager cells of
# TensorFlow and JAX (5-13 s of a framework's process each) are left to the full suite.
CELLS = [("pytorch", "tiny-bert", "eager"),
         pytest.param("tensorflow", "tiny-gpt2", "eager", marks=pytest.mark.slow),
         ("tensorflow", "tiny-distilbert", "graph"), ("jax", "tiny-roberta", "jit"),
         pytest.param("jax", "tiny-gpt2", "eager", marks=pytest.mark.slow)]


@pytest.mark.parametrize(("framework", "model", "optimization"), CELLS)
def test_cell_measures_and_records(measured, framework, model, optimization):
    record = measured(framework, model, optimization)
    assert record["status"] == "ok", record["reason"]
    timing = record["timing"]
    assert len(timing["samples_ms"]) == timing["iterations"] >= 3
    assert timing["median_ms"] > 0 and timing["cold_start_s"] > 0
    # The thread count asked for, not the 1 that OMP_NUM_THREADS said when the job started.
    assert record["threads"]["intra_op"] == 2
    assert record["threads"]["env"]["OMP_NUM_THREADS"] == "2"
    assert record["throughput"]["tokens_per_s"] == pytest.approx(
        record["throughput"]["samples_per_s"] * 16)
    assert record["memory"]["peak_host_rss_mb"] > 100  # a framework is loaded
    startup = record["startup"]
    assert 0 < startup["imports_done_s"] < startup["model_ready_s"] <= (
        startup["first_timed_iteration_s"])
    assert record["environment"]["libraries"]["transformers"].startswith("4.57")
    # The machine's own noise beside the cell: its framework's own product, timed after it.
    noise = record["machine_noise"]
    label = {"pytorch": "PyTorch F.linear", "tensorflow": "TensorFlow tf.matmul",
             "jax": "JAX jnp.matmul"}[framework]
    assert noise["workload"].startswith(label) and noise["samples"] >= 12, noise
    # Samples of about SAMPLE_S (10 ms): the count of products is set in the first ones,
    # and a JAX product got faster afterwards (7.2-7.9 ms samples).
    assert 0 <= noise["relative_iqr"] < 10 and noise["median_sample_ms"] >= 5, noise


# Fair comparisons (with tests/test_fairness.py): each framework's recipe records its
# arithmetic, attention, memory by phase and the libraries on the measured path.
@pytest.mark.parametrize(("framework", "model", "optimization"), [
    ("pytorch", "tiny-bert", "eager"), ("tensorflow", "tiny-distilbert", "graph"),
    ("jax", "tiny-roberta", "jit")])
def test_every_cell_records_arithmetic_attention_memory_phases_and_builds(
        measured, framework, model, optimization):
    record = measured(framework, model, optimization)
    assert record["status"] == "ok", record["reason"]
    assert record["arithmetic"]["tf32"] is False
    attention = record["attention"]
    assert attention["setting"] == "sdpa"
    if framework == "pytorch":  # an all-ones mask is skipped, in every recipe
        assert (attention["implementation"], attention["mask_applied"]) == ("sdpa", False)
        assert {"torch", "torch_cuda", "torch_cudnn", "torch_onednn"} <= set(record["details"])
    else:  # transformers' TF and Flax classes: explicit attention, the mask always applied
        assert (attention["implementation"], attention["mask_applied"]) == ("eager", True)
    if framework == "tensorflow":
        assert record["arithmetic"]["switches"] == {"tensor_float_32_execution": False}
        assert {"tensorflow", "tensorflow_cuda", "tensorflow_onednn",
                "TF_ENABLE_ONEDNN_OPTS"} <= set(record["details"])
    if framework == "jax":  # float32 matrix products in float32, one compiled program
        assert record["arithmetic"]["switches"] == {"default_matmul_precision": "highest"}
        assert {"jax", "jaxlib", "flax", "jax_cuda", "PJRT_NPROC"} <= set(record["details"])
        assert record["threads"]["intra_op"] == record["settings"]["threads"]
    memory = record["memory"]
    for phase in ("load_peak_mb", "resident_after_model_mb", "first_call_peak_mb",
                  "steady_peak_mb"):
        assert 0 < memory[phase] <= memory["peak_host_rss_mb"] + 1, phase
    assert memory["peak_host_rss_mb"] == pytest.approx(
        max(memory["load_peak_mb"], memory["first_call_peak_mb"], memory["steady_peak_mb"]),
        abs=8)
    compilation = record["compilation"]
    if framework == "jax":  # jit: one program, compiled once
        assert [compilation[k] for k in ("graphs", "graph_breaks", "recompiles")] == [1, 0, 0]
    else:
        assert compilation is None
    assert record["protocol"] == 1


@pytest.mark.parametrize("framework", ["pytorch", "jax"])
def test_missing_gpu_is_unsupported_with_a_reason(tmp_path, framework):
    record = run_cell(tmp_path, f"--framework={framework}", "--model=tiny-bert", "--device=gpu",
                      "--batch=1", "--seqlen=8", "--optimization=eager")
    assert record["status"] == "unsupported"
    assert "GPU" in record["reason"]
    assert record["timing"] is None


@pytest.mark.parametrize(("framework", "model", "optimization", "reason"), [
    ("pytorch", "tiny-bert", "graph", "only in TensorFlow"),
    ("jax", "tiny-xlnet", "jit", "transformers 4.57 has no JAX class for tiny-xlnet (xlnet)"),
])
def test_inapplicable_cell_does_not_load_a_framework(tmp_path, framework, model, optimization,
                                                     reason):
    record = run_cell(tmp_path, f"--framework={framework}", f"--model={model}",
                      "--device=cpu", "--batch=1", "--seqlen=8", f"--optimization={optimization}")
    assert record["status"] == "unsupported"
    assert reason in record["reason"]
    assert record["startup"] == {}  # returned before any import


def test_a_process_start_is_when_the_process_started():
    """Start-up marks count from it: psutil's create_time put it up to a second early (the
    boot time in whole seconds), on every imports_done_s. It lies between the moment the
    process was launched and the moment it reads it (a clock tick, 10 ms, of slack)."""
    launched = time.time()
    done = subprocess.run(
        [sys.executable, "-c", "import time; from dlbench.cli import _process_start; "
         "print(_process_start(), time.time())"],
        capture_output=True, text=True, timeout=60, env=tool_env())
    started, read = map(float, done.stdout.split())
    assert launched - 0.011 <= started <= read, (launched, started, read)


def test_light_import():
    code = "import sys, dlbench.cli, dlbench.plan.matrix, dlbench.plan.config; " \
           "print(any(m in sys.modules for m in ('torch', 'tensorflow', 'jax', 'transformers')))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True, env=tool_env())
    assert done.stdout.strip() == "False"
