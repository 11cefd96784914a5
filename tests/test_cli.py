"""`dlbench run` on the tiny models in the real frameworks: one valid JSON per cell."""

import json
import subprocess
import sys

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


@pytest.mark.parametrize(
    ("framework", "model", "optimization"),
    [("pytorch", "tiny-bert", "eager"), ("tensorflow", "tiny-gpt2", "eager"),
     ("tensorflow", "tiny-distilbert", "graph"), ("jax", "tiny-roberta", "jit"),
     ("jax", "tiny-gpt2", "eager")],
)
def test_cell_measures_and_records(tmp_path, framework, model, optimization):
    record = run_cell(tmp_path, f"--framework={framework}", f"--model={model}",
                      "--device=cpu", "--batch=2", "--seqlen=16",
                      f"--optimization={optimization}", "--threads=2")
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


def test_light_import():
    code = "import sys, dlbench.cli, dlbench.plan.matrix, dlbench.plan.config; " \
           "print(any(m in sys.modules for m in ('torch', 'tensorflow', 'jax', 'transformers')))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True, env=tool_env())
    assert done.stdout.strip() == "False"
