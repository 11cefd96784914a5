"""The measurement protocol: statistics, sampling, memory, repeats and the fingerprint."""

import numpy as np
import pytest

from dlbench import env
from dlbench.measure.flags import flags
from dlbench.measure.stats import between_processes, median_ci, summarize
from tests.test_cli import run_cell

BERT_BASE_PARAMETERS = 109_482_240  # BertModel(bert-base-uncased config), counted


def test_statistics_of_known_samples():
    stats = summarize([10.0] * 50 + [11.0] * 50)
    assert stats["median_ms"] == stats["p50_ms"] == 10.5
    assert stats["iqr_ms"] == pytest.approx(1.0)
    assert stats["relative_iqr"] == pytest.approx(1 / 10.5)
    low, high = stats["median_ci95_ms"]
    assert low == 10.0 and high == 11.0


def test_median_interval_covers_the_true_median():
    rng = np.random.default_rng(1)
    hits = sum(lo <= 1.0 <= hi for lo, hi in
               (median_ci(np.sort(rng.lognormal(0, 0.4, 40))) for _ in range(500)))
    assert 0.93 <= hits / 500 <= 0.995


def test_spread_between_processes():
    spread = between_processes([10.0, 10.0, 12.0])
    assert spread["processes"] == 3 and spread["median_of_medians_ms"] == 10.0
    assert spread["cv"] == pytest.approx(np.std([10, 10, 12], ddof=1) / np.mean([10, 10, 12]))


def test_flags_name_their_reason():
    calm = flags(0.02, [{"steal_fraction": 0.0}])
    assert calm == {"unstable": False, "noisy_machine": False, "reasons": []}
    noisy = flags(0.25, [{"steal_fraction": 0.12}, None])
    assert noisy["unstable"] and noisy["noisy_machine"]
    assert noisy["reasons"] == [
        "unstable: IQR is 25% of the median (limit 10%)",
        "noisy machine: 12% of the CPU time was stolen by the host (limit 5%); re-run this cell",
    ]


@pytest.mark.slow
def test_bert_base_peak_memory_exceeds_its_weights_and_uses_both_threads(tmp_path):
    record = run_cell(tmp_path, "--framework=pytorch", "--model=bert-base-uncased",
                      "--device=cpu", "--batch=1", "--seqlen=64", "--optimization=eager",
                      "--threads=2", "--min-duration-s=1")
    weights_mb = BERT_BASE_PARAMETERS * 4 / 2**20
    assert record["memory"]["peak_host_rss_mb"] > weights_mb
    assert record["memory"]["sampled_peak_rss_mb"] > weights_mb
    use = record["utilization"]
    assert 50 <= use["sample_hz"] <= 110  # the supervisor sampled at ~100 Hz, then stopped
    assert use["samples"] >= 30
    # Asked for 2 threads, it kept more than one core busy (not silently single-threaded).
    assert record["threads"]["intra_op"] == 2 and use["process_cpu_cores_mean"] > 1.2
    assert 0 <= use["steal_fraction"] <= 1 and "flags" in record


@pytest.mark.slow
def test_repeats_run_in_fresh_processes_and_pool_their_samples(tmp_path):
    record = run_cell(tmp_path, "--framework=pytorch", "--model=tiny-bert", "--device=cpu",
                      "--batch=1", "--seqlen=8", "--optimization=eager", "--repeats=3")
    timing = record["timing"]
    assert len(timing["repeats"]) == 3
    assert sum(r["iterations"] for r in timing["repeats"]) == timing["iterations"]
    assert len(timing["samples_ms"]) == timing["iterations"]
    assert timing["between_processes"]["processes"] == 3
    assert all(r["cold_start_s"] > 0 for r in timing["repeats"])  # each paid its first call


def test_fingerprint_is_stable_and_ignores_the_hostname(monkeypatch):
    first = env.fingerprint()
    assert first["fingerprint"] == env.fingerprint()["fingerprint"]
    assert len(first["packages_hash"]) == 16
    monkeypatch.setattr(env.socket, "gethostname", lambda: "another-node")
    assert env.fingerprint()["fingerprint"] == first["fingerprint"]


def test_gpu_precision_check_names_the_gpu_and_what_it_lacks():
    from dlbench.frameworks import gpu_precision_problem

    assert gpu_precision_problem("bf16", "NVIDIA H100", (9, 0)) is None
    assert gpu_precision_problem("bf16", "Tesla V100", (7, 0)) == (
        "Tesla V100 (compute capability 7.0) has no bf16 tensor cores (needs 8.0 or newer)")
    assert gpu_precision_problem("fp16", "Tesla V100", (7, 0)) is None


def test_device_timer_brackets_the_step_and_synchronizes_after():
    """On a GPU the end event is recorded right after the step is queued and read after the
    synchronization (else it would time nothing, or wait for the host)."""
    from dlbench.measure.timing import timed_loop

    calls = []

    class RecordingTimer:  # the call order is the protocol under test
        method = "order of calls"

        def start(self):
            calls.append("start")

        def stop(self):
            calls.append("stop")

        def elapsed_ms(self):
            calls.append("elapsed")
            return 1.5

    host, device = timed_loop(lambda: calls.append("step"), lambda: calls.append("sync"),
                              min_duration_s=0.0, min_iterations=3, device_timer=RecordingTimer())
    assert calls == ["start", "step", "stop", "sync", "elapsed"] * 3
    assert len(host) == 3 and device == [1.5] * 3
    host, device = timed_loop(lambda: None, lambda: None, 0.0, 2)
    assert len(host) == 2 and device is None  # the CPU: host time only


def test_gpu_figures_are_those_of_the_cell_not_of_the_cells_before():
    """per_group on a GPU: the second cell's device-memory peak is its own, though the
    first cell, in the same process, used more. (NVML is not here: the samples are placed
    as the supervisor would take them; what is tested is which of them count.)"""
    from dlbench.measure.sampler import GpuSampler

    gpu = GpuSampler.__new__(GpuSampler)
    # (time, utilization %, SM clock MHz, process memory MiB): cell 1 in 0–10 s, cell 2 after.
    gpu.samples = [(t, 90.0, 1800.0, 30000.0) for t in range(0, 10)] + \
                  [(t, 40.0, 1500.0, 5000.0) for t in range(10, 20)]
    assert gpu.memory_peak_mb(10, 19) == 5000.0
    assert gpu.memory_peak_mb(0, 19) == 30000.0
    assert gpu.window(12, 18) == {"gpu_utilization_mean": 40.0, "gpu_utilization_max": 40.0,
                                  "sm_clock_mhz_mean": 1500}
