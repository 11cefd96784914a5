"""The measurement protocol: statistics, sampling, memory, repeats and the fingerprint."""

import json
import math
import mmap
import subprocess
import sys
import textwrap
import time
from datetime import datetime
from unittest import mock

import numpy as np
import pytest
import yaml

from dlbench.measure import env
from dlbench.measure.flags import FLAGS, flags
from dlbench.measure.sampler import ProcessSampler, Sample
from dlbench.measure.stats import between_processes, median_ci, summarize
from dlbench.plan import config
from tests.conftest import REPO, TINY_CONFIG, tool_env
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
    low, high = spread["median_ci95_ms"]
    assert 0 < low < 10.0 < high  # t·s/√k: 2.9 ms either way of the mean


def test_the_interval_of_two_processes_far_apart_stops_at_zero():
    """Two seeds far apart (a training cell here: 154.7 and 90.5 ms): t with 1 degree of
    freedom is 12.7, and the centre less the half width was -285 ms. No time is negative:
    the bound is 0; the upper one stays."""
    low, high = between_processes([154.7, 90.5], 123.1)["median_ci95_ms"]
    assert low == 0.0 and high == pytest.approx(123.1 + 12.706 * 64.2 / 2, rel=1e-3)


def test_flags_name_their_reason():
    calm = flags(0.02, [{"steal_fraction": 0.0}])
    assert calm == {**dict.fromkeys(FLAGS, False), "reasons": []}
    noisy = flags(0.25, [{"steal_fraction": 0.12}, None])
    assert noisy["unstable"] and noisy["noisy_machine"]
    assert noisy["reasons"] == [
        "unstable: IQR is 25% of the median (limit 10%)",
        "noisy machine: 12% of the CPU time was stolen by the host (limit 5%); re-run this cell",
    ]


def test_a_spread_that_the_machine_shows_too_is_not_the_cells():
    """The unstable limit is 10% of the median, or 8x the spread of the fixed workload
    timed beside the cell where that is higher (dlbench.measure.noise): CI's idle cells
    spread by 16% beside a workload's 4.1%."""
    assert not flags(0.164, [None], noise={"relative_iqr": 0.041})["unstable"]
    beside_quiet = flags(0.15, [None], noise={"relative_iqr": 0.01})
    assert beside_quiet["reasons"] == [
        "unstable: IQR is 15% of the median (limit 10%; a fixed workload's beside it: 1%)"]
    beside_noisy = flags(0.40, [None], noise={"relative_iqr": 0.04})
    assert beside_noisy["reasons"] == [
        "unstable: IQR is 40% of the median (limit 32%; a fixed workload's beside it: 4%)"]
    assert flags(0.11, [None])["unstable"]  # no workload measured: the fixed limit


@pytest.mark.alone
def test_the_probe_sees_a_machine_that_slows_at_times():
    """The probe's own figure, from real work timed by the clock: a product that takes 1 ms
    every time, and one that takes three times as long in three quarters of every 0.2 s of
    the clock (a machine that slows at times, as a neighbour's bursts make it): about as
    many slow samples as fast ones, so its IQR spans the two speeds. Timed alone: beside
    another test on 2 cores, CI's steady product spread by 21% (2026-11-29)."""
    from dlbench.measure.noise import probe

    def spin(seconds: float) -> None:
        end = time.perf_counter() + seconds
        while time.perf_counter() < end:
            pass

    def slowing() -> None:
        spin(0.003 if time.perf_counter() % 0.2 < 0.15 else 0.001)

    steady = probe(lambda: spin(0.001), lambda: None, seconds=0.3)
    uneven = probe(slowing, lambda: None, seconds=0.8)
    assert steady["samples"] >= 12 and steady["median_sample_ms"] >= 10
    assert uneven["relative_iqr"] > 0.5, uneven
    assert steady["relative_iqr"] < uneven["relative_iqr"] / 2, (steady, uneven)


@pytest.mark.slow
@pytest.mark.alone
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
@pytest.mark.alone
def test_a_model_from_the_shared_weights_is_resident_before_its_first_call(tmp_path):
    """PyTorch maps the shared safetensors file: its weights must count in the resident
    model, not in the first call's peak and the steady state's cost of the input (BERT
    base had 58 MiB resident over the process before it for 418 MiB of weights, and 'steady
    − model' 362 MiB at 16 tokens)."""
    weights = tmp_path / "distilbert-base-uncased" / "model.safetensors"
    made = subprocess.run([sys.executable, "-m", "dlbench.reference", "weights",
                           "--model=distilbert-base-uncased", "--seed=0", "--threads=2",
                           f"--out={weights}"], capture_output=True, text=True, timeout=300,
                          env=tool_env())
    assert made.returncode == 0, made.stderr[-3000:]
    record = run_cell(tmp_path, "--framework=pytorch", "--model=distilbert-base-uncased",
                      "--device=cpu", "--batch=1", "--seqlen=16", "--optimization=eager",
                      "--threads=2", "--min-duration-s=0.5", f"--weights={weights}")
    memory, weights_mb = record["memory"], weights.stat().st_size / 2**20
    assert memory["resident_after_model_mb"] - memory["rss_at_start_mb"] > 0.9 * weights_mb
    assert memory["steady_peak_mb"] - memory["resident_after_model_mb"] < 0.2 * weights_mb


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


def test_packages_hash_reads_what_importlib_metadata_parses():
    """The fast read of each distribution's name and version agrees with importlib's full
    parse of its metadata, so that a hash stays the hash of results measured before it."""
    from importlib import metadata

    parsed = sorted(f"{d.metadata['Name']}=={d.version}" for d in metadata.distributions())
    assert sorted(env._name_and_version(d) for d in metadata.distributions()) == parsed
    assert len(parsed) > 50  # this environment's distributions, not none


def test_gpu_precision_check_names_the_gpu_and_what_it_lacks():
    from dlbench.frameworks import gpu_precision_problem

    assert gpu_precision_problem("bf16", "NVIDIA H100", (9, 0)) is None
    assert gpu_precision_problem("bf16", "Tesla V100", (7, 0)) == (
        "Tesla V100 (compute capability 7.0) has no bf16 tensor cores (needs 8.0 or newer)")
    assert gpu_precision_problem("fp16", "Tesla V100", (7, 0)) is None


def test_jax_gpu_memory_records_no_zero_for_a_peak_its_allocator_does_not_keep():
    """XLA's allocator on an H100 (JAX 0.11) gave peak_bytes_reserved 0 beside 1,776 MiB in
    use, which the record had kept as a reserved peak of 0 MiB; the pool's peak is what it
    holds from the device."""
    from dlbench.frameworks.jax.memory import device_peaks

    mib = 2**20
    seen = {"peak_bytes_in_use": 1776 * mib, "peak_bytes_reserved": 0,
            "peak_pool_bytes": 2048 * mib, "bytes_limit": 60000 * mib}
    assert {k: v for k, v in device_peaks(seen).items() if k != "device_method"} == {
        "device_allocated_peak_mb": 1776.0, "device_reserved_peak_mb": 2048.0}
    without_pool = device_peaks({"peak_bytes_in_use": 1776 * mib, "peak_bytes_reserved": 0})
    assert "device_reserved_peak_mb" not in without_pool
    assert device_peaks({"peak_bytes_in_use": mib, "peak_bytes_reserved": 3 * mib})[
        "device_reserved_peak_mb"] == 3.0


def test_a_gpu_peak_that_cannot_be_reset_by_phase_is_still_recorded():
    """JAX's inference and generation cells on the H100 recorded no allocator peak at all:
    the peaks over the cell were taken from the phases, which JAX (no resettable counters)
    has none of. As memory_stats() reads there (device_peaks)."""
    from dlbench.frameworks.jax.memory import device_peaks
    from dlbench.measure.memory import PhaseMemory
    from dlbench.scenarios.inference import _memory

    class JaxOnAGpu:  # the two calls _memory makes of a backend, as JAX's answers them
        def device_memory(self):
            return device_peaks({"peak_bytes_in_use": 1776 * 2**20,
                                 "peak_pool_bytes": 2048 * 2**20})

    phases = PhaseMemory()
    phases.set_device(None)  # JAX's memory_counters(): no device phases
    phases.end("load")
    recorded = _memory(JaxOnAGpu(), phases)
    assert recorded["device_allocated_peak_mb"] == 1776.0
    assert recorded["device_reserved_peak_mb"] == 2048.0
    assert "load_peak_mb" in recorded


def test_device_timer_brackets_the_step_and_synchronizes_after():
    """On a GPU the end event is recorded right after the step is queued and read after the
    synchronization (else it would time nothing, or wait for the host)."""
    from dlbench.measure.timing import Stopping, timed_loop

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

    loop = timed_loop(lambda: calls.append("step"), lambda: calls.append("sync"),
                      Stopping(min_duration_s=0.0, min_iterations=3), RecordingTimer())
    assert calls == ["start", "step", "stop", "sync", "elapsed"] * 3
    assert len(loop.host) == 3 and loop.device == [1.5] * 3
    loop = timed_loop(lambda: None, lambda: None, Stopping(0.0, 2))
    assert len(loop.host) == 2 and loop.device is None  # the CPU: host time only


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


def test_gpu_utilization_counts_only_periods_inside_the_loop():
    """NVML's utilization covers its last sample period (up to 1 s): a sample taken 0.2 s
    into a loop still holds the idle time before it. A loop shorter than the period has
    the clock only; a longer one averages the samples whose period lies inside it."""
    from dlbench.measure.sampler import UTILIZATION_PERIOD_S, GpuSampler

    gpu = GpuSampler.__new__(GpuSampler)
    # Idle before the loop (t < 10), busy in it: the first samples in it still read low.
    gpu.samples = [(10 + t / 10, 30.0 if t < 10 else 95.0, 1980.0, None) for t in range(40)]
    assert gpu.window(10.0, 10.5) == {"sm_clock_mhz_mean": 1980}
    assert gpu.window(10.0, 14.0)["gpu_utilization_mean"] == 95.0
    # A period shorter than NVML's longest would have counted the idle samples too.
    assert gpu.window(10.0, 10.0 + UTILIZATION_PERIOD_S + 0.5)["gpu_utilization_max"] == 95.0


# --- the interval of the median, and the defaults that make it mean what it says ---------


def coverage_of_median_ci(n: int) -> float:
    """The exact probability that median_ci's interval of n samples holds the true median,
    whatever the distribution: [x(l+1), x(h+1)] (1-based) holds it when l+1 ≤ B ≤ h of the
    samples fall below it, B ~ Binomial(n, ½)."""
    low, high = (int(v) for v in median_ci(np.arange(n, dtype=float)))
    return sum(math.comb(n, i) for i in range(low + 1, high + 1)) / 2**n


@pytest.mark.parametrize("path", [None, REPO / "config" / "config.yaml",
                                  *sorted((REPO / "config" / "presets").glob("*.yaml"))],
                         ids=lambda p: p.name if p else "schema")
def test_default_iterations_give_a_95_percent_interval(path):
    """With 5 iterations the interval is [min, max] and covers 94%: the defaults (the
    schema's and every shipped matrix's) must give one that covers at least 95%."""
    # The file's measurement block alone: a preset whole may need a data path to validate.
    given = yaml.safe_load(path.read_text()).get("measurement", {}) if path else {}
    measurement = config.validate({**TINY_CONFIG, "measurement": given})["measurement"]
    assert coverage_of_median_ci(measurement["min_iterations"]) >= 0.95


def test_median_interval_coverage_is_exact():
    from dlbench.measure.stats import median_ranks

    assert median_ranks(5) == (0, 4, 1 - 2 / 2**5)  # [min, max]: 93.75%, the best there is
    for n in range(6, 120):
        low, high, coverage = median_ranks(n)
        assert coverage >= 0.95 and coverage == pytest.approx(coverage_of_median_ci(n))
        assert low == n - 1 - high  # symmetric
        narrower = 1 - 2 * sum(math.comb(n, i) for i in range(low + 2)) / 2**n
        assert narrower < 0.95  # and the narrowest such
    assert median_ranks(100_000)[2] == pytest.approx(0.95, abs=0.002)
    rng = np.random.default_rng(2)
    hits = sum(lo <= 1.0 <= hi for lo, hi in
               (median_ci(np.sort(rng.lognormal(0, 0.4, 10))) for _ in range(4000)))
    assert hits / 4000 == pytest.approx(median_ranks(10)[2], abs=0.01)


# --- adaptive stopping ------------------------------------------------------------------


def busy_for(seconds: float):
    def step():
        end = time.perf_counter() + seconds
        while time.perf_counter() < end:
            pass
    return step


@pytest.mark.alone
def test_adaptive_stopping_ends_a_quiet_loop_early_and_a_noisy_one_at_the_limit():
    from dlbench.measure.timing import Stopping, timed_loop

    quiet = timed_loop(busy_for(0.002), lambda: None,
                       Stopping(min_duration_s=0.01, min_iterations=10, target_ci=0.05,
                                max_duration_s=5.0))
    assert quiet.stopped_by == "target_ci" and 10 <= len(quiet.host) < 2000
    rng = np.random.default_rng(0)
    noisy = timed_loop(lambda: busy_for(rng.choice([0.001, 0.004]))(), lambda: None,
                       Stopping(min_duration_s=0.01, min_iterations=10, target_ci=0.001,
                                max_duration_s=0.3))
    assert noisy.stopped_by == "max_duration" and sum(noisy.host) / 1e3 < 0.4
    fixed = timed_loop(busy_for(0.001), lambda: None, Stopping(0.05, 10))
    assert fixed.stopped_by == "min_duration_and_iterations"


def test_a_cell_that_never_reaches_its_target_is_flagged_with_what_it_reached():
    from dlbench.measure.timing import PhaseClock, steady_state

    rng = np.random.default_rng(1)
    settings = {"warmup_iterations": 0, "min_duration_s": 0.01, "min_iterations": 10,
                "target_ci": 0.001, "max_duration_s": 0.2}
    timing = steady_state(lambda: busy_for(rng.choice([0.001, 0.003]))(), lambda: None,
                          settings, PhaseClock(time.time()))
    assert timing["stopped_by"] == "max_duration" and timing["target_ci"] == 0.001
    result = flags(0.01, [], interval=timing)
    assert result["ci_not_reached"]
    reached = timing["median_ci95_half_width"]
    assert result["reasons"] == [f"interval not reached: the 95% interval of the median is "
                                 f"±{reached:.1%} after max_duration_s (target ±0.1%)"]


def test_recipes_that_record_cuda_graphs_warm_up_whatever_the_setting():
    """CUDA graphs are recorded on the call after the first: with warmup_iterations 0 the
    recording would land in the timed loop."""
    from dlbench.catalogue.recipes import optimization
    from dlbench.measure.timing import PhaseClock, steady_state_and_output

    for name in ("compile-reduce-overhead", "compile-max-autotune-bf16"):
        assert optimization("inference", name).recipe.min_warmup("gpu") >= 1
        assert optimization("inference", name).recipe.min_warmup("cpu") == 0
    assert optimization("inference", "compile").recipe.min_warmup("gpu") == 0
    calls = []
    settings = {"warmup_iterations": 0, "min_duration_s": 0.0, "min_iterations": 3}
    timing, output = steady_state_and_output(lambda: calls.append(1) or len(calls),
                                             lambda: None, settings, PhaseClock(time.time()),
                                             min_warmup=2)
    assert len(calls) == 1 + 2 + 3 and timing["warmup_iterations"] == 2
    assert len(timing["warmup_ms"]) == 2  # a recording would show there
    assert output == 6  # the last timed call's output: what the correctness check reads


# --- flags: other load, spread between processes ----------------------------------------


def window(other_load: float, cpus: int = 2) -> dict:
    return {"steal_fraction": 0.0, "other_load_cores": other_load, "logical_cpus": cpus}


def test_other_load_on_the_cells_cores_is_flagged():
    assert flags(0.01, [window(1.0)], threads=2)["busy_machine"]
    assert not flags(0.01, [window(0.05)], threads=2)["busy_machine"]  # the idle machine
    # On 16 cores, 10 cores of other load leave the cell's 2 alone.
    assert not flags(0.01, [window(10.0, cpus=16)], threads=2)["busy_machine"]
    assert flags(0.01, [window(15.0, cpus=16)], threads=2)["busy_machine"]
    assert noisy_flag(flags(0.01, [window(1.0)], threads=2))


def noisy_flag(result: dict) -> bool:
    from dlbench.measure.flags import noisy

    return noisy(result)


def test_busy_machine_is_flagged_by_the_supervisor(tmp_path):
    """The annotated record of a cell whose timed loop shared its cores with another process
    that slowed every iteration alike (low IQR): flagged busy, though not unstable."""
    from dlbench.records.record import annotate
    from tests.test_analysis import V1_RUN

    record = json.loads(V1_RUN.read_text())
    record["settings"]["threads"] = 2
    start = datetime.fromisoformat(record["started_at"]).timestamp()
    loop = start + record["startup"]["first_timed_iteration_s"]
    span = record["timing"]["loop_s"] - 0.002
    sampler = ProcessSampler(pid=-1)  # no such process: nothing is read, samples planted
    # Over the loop the whole machine (2 cores) was busy, the cell's tree used one core.
    sampler.samples = [Sample(loop + 0.001, 100.0, 0.0, 0, 0, 0),
                       Sample(loop + 0.001 + span, 100.0, span, 1000, 0, 1000)]
    sampler.memory = [(s.time, s.rss_mb) for s in sampler.samples]
    with mock.patch("os.cpu_count", return_value=2):
        annotated = annotate(record, sampler, None)
    assert annotated["utilization"]["other_load_cores"] == pytest.approx(1.0)
    assert annotated["flags"]["busy_machine"] and not annotated["flags"]["unstable"]


def repeat_record(samples: list[float]) -> dict:
    from dlbench.measure.stats import summarize

    return {"status": "ok", "settings": {"threads": 2},
            "timing": {**summarize(samples), "samples_ms": samples,
                       "iterations": len(samples), "loop_s": sum(samples) / 1e3,
                       "cold_start_s": 1.0},
            "memory": {"peak_host_rss_mb": 100.0, "steady_peak_mb": 90.0},
            "utilization": None, "params": {"scenario": "inference"}}


def test_repeats_take_their_interval_from_the_spread_between_processes():
    """Three processes, each steady, whose medians disagree: the pooled samples' interval
    would be narrow as if 300 independent draws; the cell's interval comes from the three
    medians, and the spread is flagged."""
    from dlbench import scenarios

    records = [repeat_record(list(np.linspace(m - 0.01, m + 0.01, 100)))
               for m in (10.0, 11.0, 12.0)]
    combined = scenarios.Scenario().combine(records)
    timing = combined["timing"]
    low, high = timing["median_ci95_ms"]
    half = 4.303 * 1.0 / math.sqrt(3)  # t(2 dof) · s / √k, s = 1 ms
    assert (low, high) == pytest.approx((11.0 - half, 11.0 + half), abs=0.01)
    assert timing["between_processes"]["cv"] == pytest.approx(1 / 11)
    assert combined["flags"]["spread_between_processes"]
    assert "between 3 processes" in timing["median_ci95_method"]
    agreeing = scenarios.Scenario().combine(
        [repeat_record(list(np.linspace(9.9, 10.1, 100))) for _ in range(3)])
    assert not agreeing["flags"]["spread_between_processes"]
    assert agreeing["timing"]["median_ci95_ms"][0] <= 10.0 <= agreeing["timing"][
        "median_ci95_ms"][1]



def test_combining_repeats_makes_a_new_record_and_leaves_the_repeats_as_they_were():
    """A scenario's combine returns a new record: the repeats it is given, the first one
    included (the record starts from a copy of it), are unchanged, whether it pools them or
    passes the first on (a single repeat, a failed one)."""
    from dlbench import scenarios

    records = [repeat_record(list(np.linspace(m - 0.01, m + 0.01, 100)))
               for m in (10.0, 11.0, 12.0)]
    records[0]["utilization"] = {"gpu_process_memory_peak_mb": 10.0}
    records[1]["utilization"] = {"gpu_process_memory_peak_mb": 30.0}
    before = json.loads(json.dumps(records))
    combined = scenarios.Scenario().combine(records)
    assert records == before
    assert combined["timing"]["iterations"] == 300 and combined["timing"]["repeats"]
    assert combined["utilization"]["gpu_process_memory_peak_mb"] == 30.0
    for given in (records[:1], [{**records[0], "status": "error"}, records[1]]):
        passed_on = scenarios.Scenario().combine(given)
        assert passed_on == given[0] and passed_on is not given[0]
        passed_on["timing"]["median_ms"] = -1.0  # the record's own, not the repeat's
    assert records == before


def test_the_combined_record_shows_the_highest_load_any_process_saw():
    """The busy flag judges every process's window; the record's other load and stolen
    share are the highest of them, not the first process's (a default run's quality table
    showed 0.01 cores for a cell whose second round saw 0.05)."""
    from dlbench import scenarios

    records = [repeat_record([10.0, 10.1, 10.2]) for _ in range(3)]
    for record, load, steal in zip(records, (0.01, 0.3, 0.05), (0.0, 0.01, 0.2), strict=True):
        record["utilization"] = {"other_load_cores": load, "steal_fraction": steal,
                                 "process_cpu_cores_mean": 1.9}
    combined = scenarios.Scenario().combine(records)
    assert combined["utilization"]["other_load_cores"] == 0.3
    assert combined["utilization"]["steal_fraction"] == 0.2
    assert combined["flags"]["busy_machine"]  # 0.3 cores of 2 threads' worth: above 0.25


def test_combined_memory_figures_come_from_one_process():
    """Two processes of a cell, one where it loaded its group's model (a high load peak),
    one where it found it loaded: the cell keeps the figures of the process with the
    higher peak, all of them, so that the steady peak never falls below the model's
    residency by mixing processes (each figure's largest did, in the default run)."""
    from dlbench import scenarios

    records = [repeat_record([10.0, 10.1, 10.2]) for _ in range(2)]
    records[0]["memory"] = {"peak_host_rss_mb": 1400.0, "load_peak_mb": 1400.0,
                            "resident_after_model_mb": 1200.0, "steady_peak_mb": 1300.0}
    records[1]["memory"] = {"peak_host_rss_mb": 1350.0, "load_peak_mb": 900.0,
                            "resident_after_model_mb": 1305.0, "steady_peak_mb": 1350.0}
    memory = scenarios.Scenario().combine(records)["memory"]
    assert memory == {**records[0]["memory"], "first_in_process": True}
    assert memory["steady_peak_mb"] >= memory["resident_after_model_mb"]


def test_combined_memory_figures_come_from_a_process_the_cell_started():
    """In rounds of per_group processes a cell is the first of its process in one round and
    follows other cells in another, where its process still holds what they left (a default
    run: every PyTorch eager cell's load peak = resident model, from such a process). The
    combined record keeps a process where the cell came first, even with the lower peak,
    and says whether it could (`first_in_process`)."""
    from dlbench import scenarios

    records = [repeat_record([10.0, 10.1, 10.2]) for _ in range(2)]
    records[0]["process"] = {"cells": 4, "position": 3}
    records[0]["memory"] = {"peak_host_rss_mb": 741.0, "load_peak_mb": 741.0,
                            "resident_after_model_mb": 741.0, "steady_peak_mb": 741.0}
    records[1]["process"] = {"cells": 4, "position": 0}
    records[1]["memory"] = {"peak_host_rss_mb": 703.0, "load_peak_mb": 341.0,
                            "resident_after_model_mb": 341.0, "steady_peak_mb": 703.0}
    memory = scenarios.Scenario().combine(records)["memory"]
    assert memory == {**records[1]["memory"], "first_in_process": True}
    records[1]["process"]["position"] = 1  # no round where it came first: the higher peak
    memory = scenarios.Scenario().combine(records)["memory"]
    assert memory == {**records[0]["memory"], "first_in_process": False}


# --- memory by phase --------------------------------------------------------------------


def test_memory_phases_separate_loading_from_the_steady_state():
    """A phase's peak is that phase's, not the process's so far: 200 MiB held while
    "loading" and freed show in the load peak only."""
    from dlbench.measure.memory import PhaseMemory

    phases = PhaseMemory()
    assert phases.resettable  # Linux: clear_refs resets VmHWM
    hoard = np.ones(200 * 2**20 // 8)  # touched: resident
    del hoard
    phases.end("load")
    phases.resident("after_model")
    phases.begin()
    # Fresh pages of its own: a 20 MiB numpy array can come from malloc's heap, whose freed
    # pages earlier tests in this process may have left resident (glibc raises its mmap
    # threshold up to 32 MiB after a large free), and then no new peak shows.
    small = mmap.mmap(-1, 20 * 2**20)
    small.write(b"\1" * len(small))  # touched: resident
    phases.end("steady")
    small.close()
    values = phases.values()
    assert set(values) == {"load_peak_mb", "resident_after_model_mb", "steady_peak_mb"}
    assert values["load_peak_mb"] > values["resident_after_model_mb"] + 150
    assert values["steady_peak_mb"] < values["load_peak_mb"] - 150
    assert values["steady_peak_mb"] >= values["resident_after_model_mb"] + 15
    assert phases.cell_peak_mb() == pytest.approx(values["load_peak_mb"], abs=1)


# --- GPU figures: NVML's window -------------------------------------------------------------


def test_nvml_peak_is_the_cells_even_without_a_cpu_window(tmp_path):
    """With sampling off (or a loop too short for two CPU samples) the CPU utilization
    window is None; NVML's peak of the cell still counts, and a repeat's largest wins."""
    from dlbench import scenarios
    from dlbench.measure.sampler import GpuSampler
    from dlbench.records.record import annotate
    from tests.test_analysis import V1_RUN

    record = json.loads(V1_RUN.read_text())
    start = datetime.fromisoformat(record["started_at"]).timestamp()
    end = datetime.fromisoformat(record["finished_at"]).timestamp()
    gpu = GpuSampler.__new__(GpuSampler)
    gpu.samples = [(start - 5, 90.0, 1800.0, 30000.0),  # the cell before, in a group
                   (start + 0.01, 40.0, 1500.0, 900.0), (end - 0.01, 40.0, 1500.0, 1200.0)]
    sampler = ProcessSampler(pid=-1)
    annotated = annotate(json.loads(json.dumps(record)), sampler, gpu)
    assert annotated["utilization"]["gpu_process_memory_peak_mb"] == 1200.0
    assert annotated["memory"]["device_process_peak_mb"] == 1200.0
    second = json.loads(json.dumps(annotated))
    second["utilization"]["gpu_process_memory_peak_mb"] = 1500.0
    combined = scenarios.Scenario().combine([annotated, second])
    assert combined["utilization"]["gpu_process_memory_peak_mb"] == 1500.0


# --- settings added after v1 --------------------------------------------------------------


def test_new_settings_reach_the_command_line_only_when_they_change_the_protocol():
    from dlbench.plan import settings

    v1 = {"warmup_iterations": 1, "min_duration_s": 0.05, "min_iterations": 3,
          "target_ci": 0, "max_duration_s": 30, "retry_noisy": 0, "attention": "sdpa"}
    args = settings.to_args(v1)
    assert not [a for a in args if a.split("=")[0] in (
        "--target-ci", "--max-duration-s", "--retry-noisy", "--attention")]
    changed = settings.to_args({**v1, "target_ci": 0.02, "attention": "eager"})
    assert {"--target-ci=0.02", "--max-duration-s=30", "--attention=eager"} <= set(changed)


def test_run_help_lists_every_setting():
    done = subprocess.run([sys.executable, "-m", "dlbench", "run", "--help"],
                          capture_output=True, text=True, env=tool_env())
    assert done.returncode == 0, done.stderr[-2000:]
    for option in ("--target-ci", "--max-duration-s", "--retry-noisy", "--attention",
                   "--max-host-memory-gib"):
        assert option in done.stdout


# --- retry_noisy ----------------------------------------------------------------------------

JITTER = textwrap.dedent('''
    import itertools
    import os
    import time
    from pathlib import Path

    from dlbench.measure.timing import steady_state
    from dlbench.scenarios import Axis, Scenario, register


    class Jitter(Scenario):
        """Sleeps; the first attempt of a cell jitters (every third call ten times its
        length: an IQR nine times the median, above the unstable limit beside any noise of
        the machine's short of 300%; a 1×/3× jitter went unflagged once beside a probe of
        37%), later ones do not."""

        name = "jitter"
        description = "a sleep that jitters on its first attempt (a test of retry_noisy)"
        axes = (Axis("ms", "durations_ms", "d", "milliseconds to sleep"),)

        def models(self):
            return ["none"]

        def optimizations(self):
            return ["plain"]

        def measure(self, backend, cell, settings, clock, inputs):
            counter = Path(os.environ["JITTER_COUNTER"])
            attempt = int(counter.read_text()) if counter.exists() else 0
            counter.write_text(str(attempt + 1))
            calls, seconds = itertools.count(), cell.size("ms") / 1e3
            slow = 10 if attempt == 0 else 1
            timing = steady_state(
                lambda: time.sleep(seconds * (slow if next(calls) % 3 == 2 else 1)),
                backend.synchronize, settings, clock)
            return {"timing": timing}


    register(Jitter())
''')


@pytest.mark.slow
@pytest.mark.alone
def test_retry_noisy_measures_a_flagged_cell_again_and_keeps_the_cleanest(tmp_path):
    plugin = tmp_path / "jitter.py"
    plugin.write_text(JITTER)
    out, counter = tmp_path / "runs" / "cell.json", tmp_path / "attempts"
    done = subprocess.run(
        [sys.executable, "-m", "dlbench", "run", "--scenario=jitter", "--framework=pytorch",
         "--model=none", "--device=cpu", "--ms=2", "--optimization=plain",
         "--warmup-iterations=1", "--min-duration-s=0.2", "--min-iterations=20",
         "--retry-noisy=3", f"--out={out}"],
        capture_output=True, text=True, timeout=300,
        env=tool_env(DLBENCH_PLUGINS=str(plugin), JITTER_COUNTER=str(counter)))
    assert done.returncode == 0, done.stderr[-3000:]
    record = json.loads(out.read_text())
    attempts = record["attempts"]
    # Measured again after the jittery first attempt; on a shared machine another noise
    # flag (busy machine) may ask for more attempts, up to 3 more.
    assert len(attempts) == int(counter.read_text()) >= 2
    assert attempts[0]["flags"][0].startswith("unstable") and not attempts[0]["kept"]
    kept = [a for a in attempts if a["kept"]]
    assert len(kept) == 1 and kept[0]["median_ms"] == record["timing"]["median_ms"]
    assert not record["flags"]["unstable"] and 2.0 <= record["timing"]["median_ms"] < 4.0
    if not record["flags"]["reasons"]:  # a clean attempt ends the retries
        assert attempts[-1]["kept"]
    assert len(kept[0]["flags"]) == min(len(a["flags"]) for a in attempts)


def test_the_machine_noise_probe_times_its_workload_after_the_cells_aftermath():
    """A workload four times as slow for its first 0.2 s (the machine still leaving the
    cell's work: a JAX eager cell's probe measured 8-16% at once, 4-6% after a warm-up)
    and steady after: the probe runs it untimed through that first stretch, so its spread
    is the steady workload's. Timed at once, its samples mixed both speeds."""
    from dlbench.measure import noise

    started: list[float] = []

    def product():
        now = time.perf_counter()
        started[:] = started or [now]
        time.sleep(0.004 if now - started[0] < 0.2 else 0.001)

    measured = noise.probe(product, lambda: None, seconds=0.25)
    assert measured["relative_iqr"] < 0.5, measured  # timed at once: 2.7 here


def test_the_share_measuring_counts_every_timed_loop_a_record_publishes():
    """The run's share of measuring (printed at its end) counts each loop whose samples a
    record publishes — the cell's own, a generation's first-token loop, a training cell's
    ablation steps — and nothing else, on the default run's real records."""
    from dlbench.records import measuring

    runs = sorted((REPO / "tests/data/default_run/runs").glob("*.json"))
    records = {path.stem: json.loads(path.read_text()) for path in runs}
    generation = next(r for name, r in records.items() if name.startswith("generation_"))
    training = next(r for name, r in records.items() if name.startswith("training_"))
    inference = next(r for name, r in records.items() if name.startswith("pytorch_"))
    first = sum(generation["generation"]["first_token"]["samples_ms"]) / 1e3
    assert first > 1.0  # the first-token loop: a second and a half a round
    assert measuring.timed_s(generation) == pytest.approx(generation["timing"]["loop_s"] + first)
    assert training["ablation"]["wall_s"] > 0
    assert measuring.timed_s(training) == pytest.approx(
        training["timing"]["loop_s"] + training["ablation"]["wall_s"])
    assert measuring.timed_s(inference) == inference["timing"]["loop_s"]
    found = measuring.share(runs, 0.0, 600.0)
    assert found["cells"] == len(runs)
    assert found["measuring_s"] == pytest.approx(sum(map(measuring.timed_s, records.values())))
    assert found["share"] == pytest.approx(found["measuring_s"] / 600.0)
