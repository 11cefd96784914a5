"""`dlbench peak`: the GEMM peak of this machine's CPU, run as the workflow runs it (its own
process), plausible and recorded; a precision without native arithmetic is unsupported, as
the CPU's flags say at run time."""

import json
import os
import subprocess
import sys

import pytest

from dlbench.frameworks import cpu_precision_problem
from dlbench.peak import peak_path
from tests.conftest import tool_env

# A generous ceiling per logical CPU: 5 GHz × 64 FLOP per cycle (two 16-wide fp32 FMA units,
# AVX-512); bf16 and fp16 units do at most 4 times that.
CEILING_GFLOPS = (os.cpu_count() or 1) * 5 * 64


def _peak(tmp_path, precision: str, *extra: str) -> dict:
    out = tmp_path / "peak.json"
    run = subprocess.run(
        [sys.executable, "-m", "dlbench", "peak", "--device=cpu", f"--precision={precision}",
         "--threads=1", f"--out={out}", *extra],
        capture_output=True, text=True, timeout=300, env=tool_env())
    assert run.returncode == 0, run.stderr[-2000:]
    record = json.loads(out.read_text())
    assert run.stdout.startswith(f"cpu {precision} ×1 threads: ")
    return record


def test_the_fp32_peak_is_plausible(tmp_path):
    record = _peak(tmp_path, "fp32", "--seconds=0.3", "--size=512")
    assert record["status"] == "ok" and record["reason"] is None
    assert 0 < record["gflops"] <= record["best_gflops"] < CEILING_GFLOPS
    assert (record["size"], record["dtype"], record["threads"]) == (512, "float32", 1)
    assert record["samples"] >= 5 and record["arithmetic"]["tf32"] is False
    assert record["environment"]["hardware_fingerprint"]
    assert record["loadavg_before"] >= 0 and record["loadavg_after"] >= 0


@pytest.mark.parametrize("precision", ["bf16", "tf32"])
def test_a_precision_runs_only_where_the_device_has_it(tmp_path, precision):
    record = _peak(tmp_path, precision, "--seconds=0.2", "--size=256")
    problem = cpu_precision_problem(precision)
    if problem:
        assert (record["status"], record["reason"]) == ("unsupported", problem)
        assert "gflops" not in record
    else:
        assert record["status"] == "ok"
        assert 0 < record["gflops"] < 4 * CEILING_GFLOPS


def test_peak_paths_name_device_precision_and_threads():
    assert peak_path("gpu", "bf16", 8) == "results/peak/gpu_bf16_t8.json"
