"""`dlbench peak`: every library's matrix product on this machine's CPU, each in its own
process, run as the workflow runs it; the best is the peak and is named; the libraries
really are the ones named (oneDNN's verbose log); a precision without native arithmetic is
unsupported, as the CPU's flags say at run time; the theoretical figure from /proc/cpuinfo
text, with its assumptions, or unknown."""

import json
import os
import subprocess
import sys

import pytest

from dlbench.catalogue import frameworks
from dlbench.files.paths import peak as peak_path
from dlbench.files.paths import peak_library as library_path
from dlbench.frameworks import cpu_precision_problem
from dlbench.measure import theoretical
from dlbench.run import peak
from tests.conftest import tool_env

# A generous ceiling per logical CPU: 5 GHz × 64 FLOP per cycle (two 16-wide fp32 FMA units,
# AVX-512); bf16 and fp16 units do at most 4 times that.
CEILING_GFLOPS = (os.cpu_count() or 1) * 5 * 64


def _peak(tmp_path, precision: str, *extra: str, env: dict | None = None, threads: int = 1):
    out = tmp_path / "peak.json"
    run = subprocess.run(
        [sys.executable, "-m", "dlbench", "peak", "--device=cpu", f"--precision={precision}",
         # No wait for a quiet machine (the tests run two at a time), unless extra asks.
         f"--threads={threads}", f"--out={out}", "--quiet-wait-s=0", *extra],
        capture_output=True, text=True, timeout=300, env=tool_env(**(env or {})))
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout.splitlines()[-1].startswith(f"cpu {precision} ×{threads} threads")
    return json.loads(out.read_text()), run.stdout


@pytest.mark.slow  # a framework process or more each: 11-21 s, the full suite's
def test_every_library_is_measured_and_the_best_is_the_named_peak(tmp_path):
    record, line = _peak(tmp_path, "fp32", "--seconds=0.3", "--size=256", "--size=384")
    # Every library every registered framework declares for the CPU.
    declared = {library.key for framework in frameworks.declarations()
                for library in framework.gemm_libraries if "cpu" in library.devices}
    assert {"torch-linear", "torch-onednn", "tf-matmul"} <= declared
    assert set(record["libraries"]) == declared
    figures = {}
    for key, lib in record["libraries"].items():
        assert lib["status"] == "ok" and lib["reason"] is None, (key, lib["reason"])
        assert 0 < lib["median_gflops"] <= lib["gflops"] < CEILING_GFLOPS
        assert [s["size"] for s in lib["sizes"]] == [256, 384]
        assert lib["gflops"] == max(s["best_gflops"] for s in lib["sizes"])
        assert all(s["samples"] >= 5 and 0 < s["cores_used"] for s in lib["sizes"])
        at_best = next(s for s in lib["sizes"] if s["size"] == lib["size"])
        assert lib["busy"] is (at_best["cores_used"] < 0.9)  # 1 thread
        assert lib["arithmetic"]["tf32"] is False and lib["dtype"] == "float32"
        figures[key] = lib["gflops"]
    # A library that did not get its cores (the other test worker beside it) is listed but
    # is no ceiling: the peak is the best of the others, as is each framework's own product.
    busy = {key for key, lib in record["libraries"].items() if lib["busy"]}
    assert record["busy_libraries"] == [key for key in record["libraries"] if key in busy]
    trusted = {key: gflops for key, gflops in figures.items() if key not in busy}
    if not trusted:  # every library ran busy: no ceiling, and the record says so
        assert record["status"] == "busy" and "no trustworthy ceiling" in record["reason"]
        return
    best = max(trusted, key=trusted.get)
    assert (record["status"], record["library"], record["gflops"]) == ("ok", best, figures[best])
    assert f"by {best} " in line and f"{figures[best]:.1f}" in line
    # Each framework's own product: its default library.
    assert record["framework_gemm"] == {
        framework.name: {"library": default.key, "gflops": figures[default.key]}
        for framework in frameworks.declarations()
        for default in framework.gemm_libraries if default.default and default.key not in busy}
    if "torch-linear" not in busy:
        assert record["framework_gemm"]["pytorch"]["library"] == "torch-linear"
    assert record["environment"]["hardware_fingerprint"]
    assert record["theoretical"]["label"] in ("at the maximum clock", "at the nominal clock",
                                              "unknown")


@pytest.mark.parametrize(("library", "onednn"), [("torch-onednn", True),
                                                 ("torch-linear", False)])
def test_the_onednn_path_runs_onednn_and_the_default_does_not(tmp_path, library, onednn):
    """oneDNN logs every primitive it runs with ONEDNN_VERBOSE=1: the oneDNN library's
    products are oneDNN's, PyTorch's default float32 product is not (MKL)."""
    record, log = _peak(tmp_path, "fp32", f"--library={library}", "--seconds=0.1",
                        "--size=128", env={"ONEDNN_VERBOSE": "1"})
    assert record["kind"] == "gemm_library" and record["status"] == "ok"
    assert ("primitive,exec,cpu,inner_product" in log) is onednn


@pytest.mark.slow  # a framework process or more each: 11-21 s, the full suite's
@pytest.mark.parametrize("precision", ["bf16", "tf32"])
def test_a_precision_runs_only_where_the_device_has_it(tmp_path, precision):
    record, _ = _peak(tmp_path, precision, "--seconds=0.2", "--size=256",
                      "--libraries", "torch-linear", "tf-matmul")
    problem = cpu_precision_problem(precision)
    assert set(record["libraries"]) == {"torch-linear", "tf-matmul"}
    if problem:
        assert (record["status"], record["reason"]) == (
            "unsupported", f"torch-linear: {problem}; tf-matmul: {problem}")
        assert "gflops" not in record
    else:
        assert record["status"] == "ok"
        assert 0 < record["gflops"] < 4 * CEILING_GFLOPS


def _library(key: str, gflops: float | None, status: str = "ok") -> dict:
    lib = peak.LIBRARIES[key]
    record = {"kind": "gemm_library", "library": key, "name": lib.name,
              "framework": lib.framework, "default": lib.default, "status": status,
              "reason": None if status == "ok" else "no such arithmetic",
              "environment": {"hardware_fingerprint": "hw"},
              "theoretical": {"gflops": 200.0, "label": "at the nominal clock",
                              "clock_mhz": 2000.0}}
    if gflops:
        record |= {"gflops": gflops, "median_gflops": gflops * 0.9, "size": 2048,
                   "dtype": "float32"}
    return record


def test_the_joined_record_names_the_best_library_and_each_frameworks_own():
    record = peak.combine([_library("torch-linear", 150.0), _library("torch-onednn", 300.0),
                           _library("tf-matmul", 120.0)], "cpu", "fp32", 2)
    assert (record["library"], record["gflops"]) == ("torch-onednn", 300.0)
    assert record["library_name"] == peak.LIBRARIES["torch-onednn"].name
    assert record["framework_gemm"] == {"pytorch": {"library": "torch-linear", "gflops": 150.0},
                                        "tensorflow": {"library": "tf-matmul", "gflops": 120.0}}
    # 300 measured against 200 in theory at the clock read: the cores ran at ≥ 3,000 MHz.
    assert "≥ 3,000 MHz" in record["theoretical"]["measured_above"]
    assert record["environment"] == {"hardware_fingerprint": "hw"}  # the measuring machine's
    assert "torch-onednn" in peak.describe(record)
    assert record["busy_libraries"] == []
    below = peak.combine([_library("torch-linear", 150.0)], "cpu", "fp32", 2)
    assert "measured_above" not in below["theoretical"]


def test_a_busy_library_is_listed_but_is_no_ceiling():
    """Issue 38: torch.matmul measured on one core of its two threads (49.8 GFLOP/s against
    109 alone) became PyTorch's own GEMM, and its cells stood above it. A library that
    never got its cores is kept in the record, named busy, and is neither the peak nor its
    framework's own product; with only busy libraries there is no ceiling at all."""
    record = peak.combine([_library("torch-linear", 400.0) | {"busy": True},
                           _library("torch-onednn", 300.0), _library("tf-matmul", 120.0)],
                          "cpu", "fp32", 2)
    assert record["busy_libraries"] == ["torch-linear"]
    assert (record["status"], record["library"], record["gflops"]) == ("ok", "torch-onednn",
                                                                        300.0)
    assert set(record["libraries"]) == {"torch-linear", "torch-onednn", "tf-matmul"}
    assert record["framework_gemm"] == {"tensorflow": {"library": "tf-matmul",
                                                       "gflops": 120.0}}
    assert "torch-linear 400.0 busy" in peak.describe(record)
    only_busy = peak.combine([_library("torch-linear", 50.0) | {"busy": True,
                                                                "attempts": [{}, {}, {}]}],
                             "cpu", "fp32", 2)
    assert only_busy["status"] == peak.BUSY and "gflops" not in only_busy
    assert only_busy["reason"].startswith("no trustworthy ceiling: every library ran on a "
                                          "busy machine")
    assert "3 attempt(s) of torch-linear" in only_busy["reason"]
    assert only_busy["framework_gemm"] == {}


def test_a_library_beside_a_spinning_process_is_measured_again_and_named_busy(tmp_path):
    """A real process spinning on one of the machine's cores beside a product of as many
    threads as there are cores: the library waits for a quiet machine (in vain), is
    measured again, never gets its cores and is named busy, every attempt recorded. (A
    library that gets its cores is not busy: the test above, whose one thread has a core.)"""
    threads = min(2, os.cpu_count() or 1)
    spinner = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        busy, line = _peak(tmp_path, "fp32", "--library=torch-linear", "--seconds=0.3",
                           "--size=512", "--attempts=2", "--quiet-wait-s=1", threads=threads)
    finally:
        spinner.kill()
        spinner.wait()
    assert busy["busy"] is True and len(busy["attempts"]) == 2
    assert all(a["busy"] and a["cores_used"] < 0.9 * threads for a in busy["attempts"])
    assert busy["quiet"]["quiet"] is False and busy["quiet"]["other_load_cores"] > 0.5
    assert busy["attempts"][0]["other_load_cores"] > 0.5  # the spinner, while it multiplied
    assert "BUSY" in line


def test_peak_paths_name_device_precision_threads_and_library():
    assert peak_path("gpu", "bf16", 8) == "results/peak/gpu_bf16_t8.json"
    assert library_path("cpu", "fp32", 2, "tf-matmul") == \
        "results/peak/libraries/cpu_fp32_t2_tf-matmul.json"
    # In the registry's order, on the devices each is declared for (oneDNN through PyTorch
    # and ONNX Runtime's MatMul: CPU only).
    gpu = peak.libraries("gpu")
    assert gpu[:2] == ["torch-linear", "tf-matmul"] and "torch-onednn" not in gpu
    assert set(peak.libraries("cpu")) == set(gpu) | {"torch-onednn", "ort-matmul"}
    assert peak.libraries("cpu", {"pytorch"}) == ["torch-linear", "torch-onednn"]


def _cpuinfo(vendor: str, family: int, model: int, flags: str, mhz: str | None = "2445.402",
             cores: int = 2) -> str:
    blocks = []
    for core in range(cores):
        lines = [f"processor\t: {core}", f"vendor_id\t: {vendor}", f"cpu family\t: {family}",
                 f"model\t\t: {model}", "physical id\t: 0", f"core id\t\t: {core}",
                 f"cpu cores\t: {cores}", f"flags\t\t: fpu sse sse2 {flags}"]
        if mhz:
            lines.insert(4, f"cpu MHz\t\t: {mhz}")
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks) + "\n"


def test_theoretical_peak_of_a_256_bit_zen3_in_a_vm():
    info = _cpuinfo("AuthenticAMD", 25, 1, "avx fma avx2 hypervisor")
    figure = theoretical.cpu_fp32(info, threads=2)
    # 2 cores × 2 FMA units × 8 lanes × 2 FLOP × 2445.402 MHz
    assert figure["gflops"] == pytest.approx(2 * 2 * 8 * 2 * 2.445402)
    assert (figure["vector_bits"], figure["fma_units"], figure["label"]) == (
        256, 2, "at the nominal clock")
    assert any("Zen 3" in a for a in figure["assumptions"])
    assert any("nominal clock" in a and "boost" in a for a in figure["assumptions"])
    # More threads than cores: the cores' units, no more.
    assert theoretical.cpu_fp32(info, threads=8)["gflops"] == figure["gflops"]
    assert theoretical.cpu_fp32(info, threads=1)["gflops"] == pytest.approx(
        figure["gflops"] / 2)


def test_theoretical_peak_of_a_512_bit_cpu_at_its_maximum_clock():
    intel = _cpuinfo("GenuineIntel", 6, 143, "avx fma avx2 avx512f", cores=4)
    figure = theoretical.cpu_fp32(intel, threads=4, max_mhz=3000.0)
    assert figure["gflops"] == pytest.approx(4 * 2 * 16 * 2 * 3.0)
    assert figure["label"] == "at the maximum clock" and figure["vector_bits"] == 512
    assert any(a.startswith("FMA units: assumed 2") for a in figure["assumptions"])
    # Zen 4 runs its 512-bit instructions on 256-bit units: half that per cycle.
    zen4 = _cpuinfo("AuthenticAMD", 25, 17, "avx fma avx2 avx512f", cores=4)
    assert theoretical.cpu_fp32(zen4, threads=4, max_mhz=3000.0)["gflops"] == \
        pytest.approx(figure["gflops"] / 2)


def test_theoretical_peak_is_unknown_without_a_clock_or_fma():
    no_clock = theoretical.cpu_fp32(_cpuinfo("AuthenticAMD", 25, 1, "avx fma avx2", mhz=None),
                                    threads=2)
    assert no_clock["gflops"] is None and no_clock["label"] == "unknown"
    assert "clock" in no_clock["reason"]
    no_fma = theoretical.cpu_fp32(_cpuinfo("GenuineIntel", 6, 15, "ssse3"), threads=2)
    assert no_fma["gflops"] is None and "FMA" in no_fma["reason"]
