"""dlbench.analysis on small hand-built summaries: every value below is worked out by hand
from the cells it is built from."""

import json
import math
from datetime import datetime
from pathlib import Path

import matplotlib
import numpy as np
import pandas as pd
import pytest

from dlbench.analysis import (
    compilation,
    correctness,
    environment,
    flags,
    generic,
    gpu,
    latency,
    memory,
    plots,
    precision,
    quality,
    ratio,
    speedup,
    startup,
    status,
    uncertainty,
)
from dlbench.analysis.summary import derive, load, of_scenario, scenarios, timed
from dlbench.files import atomic
from dlbench.measure.flags import NOISY_STEAL_FRACTION, UNSTABLE_RELATIVE_IQR
from dlbench.measure.sampler import ProcessSampler, Sample
from dlbench.measure.stats import summarize
from dlbench.records import aggregate
from dlbench.records import record as records
from tests.conftest import REPO

matplotlib.use("Agg")
V1_RUN = REPO / "tests/data/v1_results/per_cell/runs/pytorch_tiny-bert_cpu_b1_s8_eager.json"


def cell(framework="pytorch", optimization="eager", median=None, *, status="ok", reason=None,
         model="bert", device="cpu", batch=1, seqlen=8, within=True, rel_error=1e-6,
         **extra) -> dict:
    """One summary row; a timed cell unless median is None or status is not ok."""
    row = {"cell_id": f"{framework}_{model}_{device}_b{batch}_s{seqlen}_{optimization}",
           "framework": framework, "model": model, "device": device, "batch": batch,
           "seqlen": seqlen, "optimization": optimization, "status": status,
           "reason": reason, "median_ms": median if status == "ok" else np.nan}
    if status == "ok" and within is not None:
        row.update(correctness_within_tolerance=within, correctness_max_rel_error=rel_error,
                   correctness_max_abs_error=rel_error * 10, correctness_tolerance=1e-4,
                   correctness_precision="fp32")
    return row | extra


def frame(*rows: dict) -> pd.DataFrame:
    return derive(pd.DataFrame(list(rows)))


@pytest.fixture
def summary() -> pd.DataFrame:
    """Two frameworks, one model, lengths 8 and 16: PyTorch eager, torchscript (one wrong
    answer, faster) and compile (out of memory at 16); TensorFlow eager and graph, and
    xla without an eager baseline at 16; a flagged cell; every reason shape."""
    unstable = {"flags_unstable": True, "flags_noisy_machine": False,
                "flags_reasons": "unstable: IQR is 30% of the median (limit 10%)"}
    steady = {"flags_unstable": False, "flags_noisy_machine": False, "flags_reasons": ""}
    return frame(
        cell("pytorch", "eager", 10.0, prepare_s=0.0, cold_start_s=0.5, compile_s=0.49,
             **steady),
        cell("pytorch", "eager", 40.0, seqlen=16, **steady),
        cell("pytorch", "torchscript", 5.0, prepare_s=1.0, cold_start_s=0.2, compile_s=1.0,
             **unstable),
        cell("pytorch", "torchscript", 5.0, seqlen=16, within=False, rel_error=0.5,
             prepare_s=2.0, cold_start_s=0.3, compile_s=3.0, **steady),
        cell("pytorch", "compile", 2.5, prepare_s=0.0, cold_start_s=9.0, compile_s=8.9975,
             **steady),
        cell("pytorch", "compile", status="oom", reason="CUDA out of memory", seqlen=16),
        cell("pytorch", "graph", status="unsupported", reason="graph does not exist in PyTorch"),
        cell("pytorch", "graph", status="unsupported", seqlen=16,
             reason="graph does not exist in PyTorch"),
        cell("tensorflow", "eager", 20.0, **steady),
        cell("tensorflow", "eager", status="error", reason="ValueError: boom", seqlen=16),
        cell("tensorflow", "graph", 4.0, **steady),
        cell("tensorflow", "graph", 30.0, seqlen=16, **steady),
        cell("tensorflow", "xla", 16.0, seqlen=16, within=None, **steady),
        cell("tensorflow", "xla", status="unsupported", reason="XLA needs a GPU here"),
    )


def by_id(frame: pd.DataFrame, cell_id: str) -> pd.Series:
    return frame.set_index("cell_id").loc[cell_id]


# --- the summary and its derived columns ------------------------------------------------


def test_speedup_is_over_the_same_cells_eager(summary):
    speedups = summary.set_index("cell_id")["speedup"]
    assert speedups["pytorch_bert_cpu_b1_s8_torchscript"] == pytest.approx(10.0 / 5.0)
    assert speedups["pytorch_bert_cpu_b1_s16_torchscript"] == pytest.approx(40.0 / 5.0)
    assert speedups["pytorch_bert_cpu_b1_s8_compile"] == pytest.approx(10.0 / 2.5)
    assert speedups["pytorch_bert_cpu_b1_s8_eager"] == pytest.approx(1.0)
    assert speedups["tensorflow_bert_cpu_b1_s8_graph"] == pytest.approx(20.0 / 4.0)
    # No eager timing at length 16 for TensorFlow (an error): no speed-up there.
    assert np.isnan(speedups["tensorflow_bert_cpu_b1_s16_graph"])
    assert np.isnan(speedups["tensorflow_bert_cpu_b1_s16_xla"])
    # Cells without a timing have none either.
    assert np.isnan(speedups["pytorch_bert_cpu_b1_s16_compile"])


def test_wrong_answer_is_checked_and_outside_tolerance(summary):
    indexed = summary.set_index("cell_id")
    assert indexed["wrong_answer"].sum() == 1
    assert indexed.loc["pytorch_bert_cpu_b1_s16_torchscript", "wrong_answer"]
    # Unchecked is not wrong, and not checked.
    xla = indexed.loc["tensorflow_bert_cpu_b1_s16_xla"]
    assert not xla["wrong_answer"] and not xla["checked"]
    assert indexed["timed"].sum() == 9


def test_summary_without_newer_columns_still_derives():
    old = pd.DataFrame([{"cell_id": "a", "framework": "pytorch", "model": "m", "device": "cpu",
                         "batch": 1, "seqlen": 8, "optimization": "eager", "status": "ok",
                         "median_ms": 3.0}])
    derived = derive(old)
    assert derived.loc[0, "scenario"] == "inference"
    assert not derived.loc[0, "wrong_answer"] and not derived.loc[0, "checked"]
    assert derived.loc[0, "speedup"] == pytest.approx(1.0)
    assert np.isnan(derived.loc[0, "compile_s"])
    # Only cell ids and statuses: still a frame the analysis can read.
    bare = derive(pd.DataFrame({"cell_id": ["x"], "status": ["error"]}))
    assert not bare["timed"].any() and bare.loc[0, "scenario"] == "inference"


def test_scenarios_default_to_inference_and_keep_their_baselines_apart():
    rows = pd.DataFrame([
        cell("pytorch", "eager", 10.0) | {"scenario": None},
        cell("pytorch", "torchscript", 5.0) | {"scenario": "inference"},
        cell("pytorch", "eager", 1.0) | {"scenario": "zeta", "cell_id": "z"},
        cell("pytorch", "eager", 1.0) | {"scenario": "echo", "cell_id": "e"},
    ])
    derived = derive(rows)
    assert scenarios(derived) == ["inference", "echo", "zeta"]
    assert len(of_scenario(derived, "inference")) == 2
    # torchscript's baseline is inference's eager (10 ms), not another scenario's (1 ms).
    assert by_id(derived, "pytorch_bert_cpu_b1_s8_torchscript")["speedup"] == pytest.approx(2)


def test_an_ambiguous_eager_baseline_is_none():
    """Cells that share every baseline key (a scenario whose sizes are other columns) have
    no speed-up rather than one over an arbitrary eager cell, and no row is duplicated."""
    rows = pd.DataFrame([
        {"cell_id": f"e{i}", "scenario": "echo", "framework": "pytorch", "model": "m",
         "device": "cpu", "optimization": optimization, "payload": i % 2, "status": "ok",
         "median_ms": 1.0 + i}
        for i, optimization in enumerate(["eager", "eager", "graph"])
    ])
    derived = derive(rows)
    assert derived["cell_id"].tolist() == ["e0", "e1", "e2"]
    assert derived["speedup"].isna().all()


def test_load_reads_a_parquet(tmp_path, summary):
    path = tmp_path / "summary.parquet"
    summary.drop(columns=["timed", "checked", "wrong_answer", "eager_ms", "speedup"]).to_parquet(
        path)
    loaded = load(path)
    assert loaded["speedup"].equals(summary["speedup"])


# --- environment and status ----------------------------------------------------------------


def env_rows(**columns) -> pd.DataFrame:
    base = {"framework": ["pytorch", "tensorflow", "tensorflow"], "env_fingerprint": ["f"] * 3,
            "env_hostname": ["h1"] * 3, "env_torch": ["2.0", None, None],
            "env_git_commit": ["0123456789abcdef"] * 3, "env_git_dirty": [False, True, True]}
    return pd.DataFrame(base | columns)


def test_environment_agrees_when_a_framework_lacks_the_others_version():
    env = environment.environment(env_rows(env_git_dirty=[False] * 3))
    assert env.disagree == [] and env.hosts == 0
    values = dict(zip(env.table[""], env.table["value"], strict=True))
    assert values["torch"] == "2.0"
    assert values["git commit"] == "0123456789ab"


def test_several_hosts_with_one_fingerprint_are_comparable():
    env = environment.environment(env_rows(env_hostname=["h1", "h2", "h2"],
                                           env_git_dirty=[False] * 3))
    assert env.disagree == [] and env.hosts == 2


def test_environment_disagreement_lists_each_combination():
    env = environment.environment(env_rows(env_torch=["2.0", "2.1", None],
                                           framework=["pytorch", "pytorch", "tensorflow"]))
    assert env.disagree == ["torch"]
    assert env.notes == ["git commit"]  # the dirty flag differs: a note, not a disagreement
    cells = dict(zip(env.table["framework"], env.table["cells"], strict=False))
    assert cells == {"PyTorch": 1, "TensorFlow": 1}
    assert set(env.table["torch"]) == {"2.0", "2.1", "—"}  # TensorFlow's cells have no torch


def two_environments(**changes) -> pd.DataFrame:
    """A PyTorch cell and a TensorFlow cell from two environments, one per framework (as
    two conda environments): everything but the hardware differs in their fingerprints."""
    rows = {"framework": ["pytorch", "tensorflow"], "device": ["cpu", "cpu"],
            "precision": ["fp32", "fp32"], "env_fingerprint": ["a1", "b2"],
            "env_hardware_fingerprint": ["h", "h"], "env_packages_hash": ["p1", "p2"],
            "env_hostname": ["n1", "n1"], "env_cpu_model": ["EPYC", "EPYC"],
            "env_torch": ["2.13.0", None], "env_tensorflow": [None, "2.21.0"],
            "path_torch": ["2.13.0", None], "path_tensorflow": [None, "2.21.0"],
            "path_transformers": ["4.57.6", "4.57.6"],
            "path_torch_cuda": ["12.8", None], "path_tensorflow_cuda": [None, "12.5.1"],
            "arithmetic_tf32": [False, False]}
    return pd.DataFrame(rows | changes)


def test_one_environment_per_framework_is_comparable():
    """Two environments differ in their package hash (and so their whole fingerprint) by
    design: that alone does not make a PyTorch/TensorFlow pair incomparable, nor do the
    CUDA builds of CPU cells, which no CPU cell runs."""
    env = environment.environment(two_environments())
    assert env.disagree == []
    assert env.notes == ["packages"]
    values = dict(zip(env.table[""], env.table["value"], strict=True))
    assert values["torch"] == "2.13.0" and values["tensorflow"] == "2.21.0"
    assert "torch CUDA" not in values  # not on a CPU cell's path


@pytest.mark.parametrize(("changes", "disagree"), [
    ({"env_hardware_fingerprint": ["h", "other"], "env_cpu_model": ["EPYC", "Xeon"]},
     ["hardware", "CPU"]),
    ({"path_transformers": ["4.57.6", "4.56.0"]}, ["transformers"]),
    ({"device": ["gpu", "gpu"], "path_torch_cuda": ["12.8", "12.8"],
      "path_tensorflow_cuda": ["12.5.1", "12.5.1"], "path_torch": ["2.13.0", "2.12.0"]},
     ["torch"]),
    ({"arithmetic_tf32": [False, True]}, ["TF32 (fp32 cells)"]),
])
def test_what_matters_for_a_comparison_disagrees(changes, disagree):
    assert environment.environment(two_environments(**changes)).disagree == disagree


def test_older_summaries_count_a_library_only_on_its_frameworks_path():
    rows = two_environments().drop(columns=["path_torch", "path_tensorflow",
                                            "path_transformers"])
    rows["env_torch"] = ["2.13.0", "2.12.0"]  # the TensorFlow environment has another torch
    assert environment.environment(rows).disagree == []


def test_status_counts_and_cells_without_timing(summary):
    counts = status.status_counts(summary).set_index("framework")
    # PyTorch's graph cells are not applicable by design: a column of their own.
    assert list(counts.columns) == ["ok", "oom", "unsupported", "error", "not applicable",
                                    "total"]
    assert counts.loc["PyTorch"].tolist() == [5, 1, 0, 0, 2, 8]
    assert counts.loc["TensorFlow"].tolist() == [4, 0, 1, 1, 0, 6]
    assert counts.loc["total"].tolist() == [9, 1, 1, 1, 2, 14]
    untimed = status.untimed(summary)  # not listing the cells not applicable by design
    assert untimed["cell_id"].tolist() == ["tensorflow_bert_cpu_b1_s16_eager",
                                           "pytorch_bert_cpu_b1_s16_compile",
                                           "tensorflow_bert_cpu_b1_s8_xla"]
    assert status.not_applicable_combinations(summary).values.tolist() == [
        ["PyTorch", "graph", 2]]


def test_status_counts_without_cells_not_applicable(summary):
    counts = status.status_counts(summary[~status.not_applicable(summary)])
    assert "not applicable" not in counts


# --- flags -------------------------------------------------------------------------------------


def test_flags_recomputed_with_the_harness_thresholds():
    rows = frame(
        cell(median=1.0, relative_iqr=UNSTABLE_RELATIVE_IQR, utilization_steal_fraction=0.0),
        cell(median=1.0, seqlen=2, relative_iqr=UNSTABLE_RELATIVE_IQR * 1.01,
             utilization_steal_fraction=NOISY_STEAL_FRACTION),
        cell(median=1.0, seqlen=3, relative_iqr=0.01,
             utilization_steal_fraction=NOISY_STEAL_FRACTION * 1.01),
        cell(median=1.0, seqlen=4, relative_iqr=0.01, utilization_steal_fraction=np.nan),
        cell(status="error", seqlen=5, reason="x"),
    )
    flagged = flags.recompute(rows)
    assert flagged["unstable"].tolist() == [False, True, False, False]
    assert flagged["noisy_machine"].tolist() == [False, False, True, False]
    assert flagged["reasons"].iloc[2].startswith("noisy machine: 5% of the CPU time")
    assert flagged["reasons"].iloc[0] == ""


def test_unstable_recomputed_against_the_machines_own_noise():
    """The summary's machine_noise_relative_iqr raises the unstable limit to 8x it."""
    rows = frame(cell(median=1.0, relative_iqr=0.20, machine_noise_relative_iqr=0.03),
                 cell(median=1.0, seqlen=2, relative_iqr=0.15, machine_noise_relative_iqr=0.01),
                 cell(median=1.0, seqlen=3, relative_iqr=0.15))
    flagged = flags.recompute(rows)
    assert flagged["unstable"].tolist() == [False, True, True]
    assert flagged["reasons"].iloc[1].endswith("(limit 10%; a fixed workload's beside it: 1%)")


def test_a_generations_graphs_count_after_its_warm_up():
    """A compiled generation has its prompt's and its decoding step's graphs, and
    recompiles once in its warm-up by design (3 graphs, 2 recompilations in the default
    run): not flagged; one recompilation after the warm-up, or a graph break, is."""
    warm = {"compilation_graphs": 3, "compilation_graph_breaks": 0,
            "compilation_recompiles": 2, "compilation_recompiles_after_second_call": 0}
    rows = frame(cell(optimization="compile", median=1.0, relative_iqr=0.01, **warm),
                 cell(optimization="compile", median=1.0, seqlen=2, relative_iqr=0.01,
                      **warm | {"compilation_recompiles_after_second_call": 1}),
                 cell(optimization="compile", median=1.0, seqlen=3, relative_iqr=0.01,
                      **warm | {"compilation_graph_breaks": 1}),
                 cell(optimization="compile", median=1.0, seqlen=4, relative_iqr=0.01,
                      **{k: v for k, v in warm.items() if "second" not in k}))
    found = flags.recompute(rows)
    assert found["not_one_graph"].tolist() == [False, True, True, True]
    assert found["reasons"].iloc[1] == ("not one graph: 0 graph break(s) and 1 "
                                        "recompilation(s) after the warm-up")
    assert found["reasons"].iloc[3] == ("not one graph: 3 graph(s), with 0 graph break(s) "
                                        "and 2 recompilation(s)")


def test_every_flag_recomputed_from_the_summary():
    """The flags added after the first two, from the columns that hold their figures."""
    quiet = {"utilization_steal_fraction": 0.0, "utilization_other_load_cores": 0.0,
             "utilization_logical_cpus": 2, "intra_op_threads": 2, "relative_iqr": 0.01}
    rows = frame(
        cell(median=1.0, **quiet),
        cell(median=1.0, seqlen=2, **quiet | {"utilization_other_load_cores": 1.0}),
        cell(median=1.0, seqlen=3, **quiet | {"utilization_other_load_cores": 1.0,
                                              "utilization_logical_cpus": 16}),
        cell(median=1.0, seqlen=4, **quiet, between_processes_cv=0.08),
        cell(median=1.0, seqlen=5, **quiet, target_ci=0.02, stopped_by="max_duration",
             median_ci95_half_width=0.05),
        cell(median=1.0, seqlen=6, **quiet, target_ci=0.02, stopped_by="target_ci",
             median_ci95_half_width=0.01),
        cell(optimization="compile", median=1.0, seqlen=7, **quiet, compilation_graphs=2,
             compilation_graph_breaks=1, compilation_recompiles=0),
    )
    found = flags.recompute(rows)
    assert found["busy_machine"].tolist() == [False, True, False, False, False, False, False]
    assert found["spread_between_processes"].tolist() == [False] * 3 + [True] + [False] * 3
    assert found["ci_not_reached"].tolist() == [False] * 4 + [True, False, False]
    assert found["not_one_graph"].tolist() == [False] * 6 + [True]
    assert found["reasons"].iloc[1].startswith("busy machine: other processes kept 1.00")
    assert found["reasons"].iloc[4] == ("interval not reached: the 95% interval of the median "
                                        "is ±5.0% after max_duration_s (target ±2.0%)")
    assert flags.flagged(rows.assign(flags_busy_machine=[False, True] + [False] * 5)).sum() == 1


def harness_record(tmp_path: Path, name: str, samples_ms: list[float], steal: float) -> Path:
    """A real v1 record whose timing comes from `samples_ms` and whose timed loop the host
    stole `steal` of the CPU from, annotated by the harness's own supervisor code."""
    record = json.loads(V1_RUN.read_text())
    record["cell_id"] = name
    record["params"]["seqlen"] = len(list(tmp_path.iterdir())) + 1
    record["timing"].update(summarize(samples_ms), samples_ms=samples_ms,
                            iterations=len(samples_ms))
    start = datetime.fromisoformat(record["started_at"]).timestamp()
    loop_start = start + record["startup"]["first_timed_iteration_s"]
    sampler = ProcessSampler(pid=-1)  # no such process: nothing is read, samples planted
    total = 1000
    sampler.samples = [Sample(loop_start + 0.001, 100.0, 0.0, 0, 0, 0),
                       Sample(loop_start + 0.002, 100.0, 0.001, 500, round(steal * total),
                              total)]
    sampler.memory = [(s.time, s.rss_mb) for s in sampler.samples]
    record = records.annotate(record, sampler, None)
    path = tmp_path / f"{name}.json"
    atomic.write_json_atomic(path, record)
    return path


def test_flags_recomputed_from_the_summary_match_the_harness(tmp_path):
    spreads = {"steady": ([10.0] * 9 + [10.5], 0.0), "unstable": ([8.0, 10.0, 12.0, 14.0], 0.0),
               "noisy": ([10.0] * 10, 0.2), "both": ([5.0, 10.0, 20.0], 0.5),
               "edge": ([10.0] * 10, NOISY_STEAL_FRACTION)}
    paths = [harness_record(tmp_path, name, samples, steal)
             for name, (samples, steal) in spreads.items()]
    summary = aggregate.summarize(paths)
    stored = summary.set_index("cell_id")
    recomputed = flags.recompute(summary).set_index(summary["cell_id"])
    assert stored["flags_unstable"].astype(bool).tolist() == [False, True, False, True, False]
    assert recomputed["unstable"].tolist() == stored["flags_unstable"].astype(bool).tolist()
    assert (recomputed["noisy_machine"].tolist()
            == stored["flags_noisy_machine"].astype(bool).tolist())
    assert recomputed["reasons"].tolist() == stored["flags_reasons"].fillna("").tolist()
    assert stored.loc["noisy", "flags_noisy_machine"] and not stored.loc["edge",
                                                                          "flags_noisy_machine"]


def test_stored_flags_read_missing_as_unflagged(summary):
    assert flags.flagged(summary).sum() == 1
    assert not flags.flagged(summary.drop(columns=["flags_unstable", "flags_noisy_machine"])).any()


# --- the latency spreadsheet ----------------------------------------------------------------


def test_latency_sheet_marks_flags_wrong_answers_and_reasons(summary):
    sheets = {(s.framework, s.optimization): s for s in latency.sheets(summary)}
    assert list(sheets) == sorted(sheets)  # framework, then optimization
    torchscript = sheets["pytorch", "torchscript"].table
    assert torchscript.columns.tolist() == ["model", "batch", "seqlen 8", "seqlen 16"]
    assert torchscript.iloc[0].tolist() == ["bert", 1, "5.00 †", "5.00 ✗"]
    tips = sheets["pytorch", "torchscript"].tooltips.iloc[0].tolist()
    assert tips[:2] == ["", ""]
    assert tips[2] == "unstable: IQR is 30% of the median (limit 10%)"
    assert tips[3] == "wrong answer: max rel error 5.0e-01 > tolerance 1.0e-04"
    compiled = sheets["pytorch", "compile"]
    assert compiled.table.iloc[0, 2:].tolist() == ["2.50", "N/A (out of memory)"]
    assert compiled.tooltips.iloc[0, 3] == "oom: CUDA out of memory"
    # Another framework's optimization: no sheet (the status section counts its cells).
    assert ("pytorch", "graph") not in sheets
    # Every cell of a sheet unsupported for one reason: one line instead of a table.
    gpu_only = [cell("tensorflow", "xla", status="unsupported", reason="needs a GPU",
                     seqlen=n) for n in (8, 16)]
    [xla] = latency.sheets(frame(*gpu_only))
    assert (xla.not_run, xla.table) == ((2, "unsupported", "needs a GPU"), None)
    # One cell only: a table even though it did not run.
    assert sheets["tensorflow", "xla"].table.iloc[0, 2:].tolist() == [
        "N/A (XLA needs a GPU here)", "16.0"]


def test_latency_sheet_marks_cells_outside_the_matrix():
    sheet = latency.sheets(frame(cell(median=1234.5, model="a"), cell(median=0.01234, model="b",
                                                                       seqlen=16)))[0]
    assert sheet.table["model"].tolist() == ["a", "b"]
    assert sheet.table[["seqlen 8", "seqlen 16"]].to_numpy().tolist() == [
        ["1,234", "—"], ["—", "0.0123"]]
    assert sheet.tooltips[["seqlen 8", "seqlen 16"]].to_numpy().tolist() == [["", ""],
                                                                             ["", ""]]


def test_long_reasons_are_shortened_with_the_full_reason_on_hover():
    reason = "sequence length 4096 exceeds the model's maximum of 512 positions"
    sheet = latency.sheets(frame(cell(status="unsupported", reason=reason)))[0]
    text = sheet.table.iloc[0, 2]
    assert text.startswith("N/A (sequence length 4096") and text.endswith("…)")
    assert len(text) == len("N/A ()") + 40
    assert sheet.tooltips.iloc[0, 2] == f"unsupported: {reason}"


# --- measurement quality --------------------------------------------------------------------


def test_quality_shows_the_flagged_cells_least_stable_first():
    rows = frame(
        cell(median=1.0, relative_iqr=0.2, flags_unstable=True, flags_reasons="a"),
        cell(median=2.0, seqlen=2, relative_iqr=0.5, flags_unstable=True, flags_reasons="b"),
        cell(median=3.0, seqlen=3, relative_iqr=0.9, flags_unstable=False, flags_reasons=""),
    )
    measured = quality.quality(timed(rows))
    assert measured.flagged == 2
    assert measured.table["cell"].tolist() == ["pytorch_bert_cpu_b1_s2_eager",
                                               "pytorch_bert_cpu_b1_s8_eager"]
    assert measured.table["IQR / median"].tolist() == ["50.0%", "20.0%"]
    # In rounds, the spread within a process as the unstable flag judges it (the median of
    # the rounds'), not the pooled samples', which count the drift between rounds.
    rounds = quality.quality(timed(rows.assign(rounds_relative_iqr=[[0.1, 0.12], [0.4, 0.3],
                                                                   [0.01, 0.02]])))
    assert rounds.table["IQR / median"].tolist() == ["35.0%", "11.0%"]
    calm = quality.quality(timed(rows.assign(flags_unstable=False)))
    assert calm.flagged == 0 and calm.table["median ms"].tolist() == ["3.00", "2.00", "1.00"]
    assert quality.quality(timed(frame(cell(median=1.0)))) is None
    assert calm.machine_noise is None  # no cell has the machine's own noise beside it
    noise = quality.quality(timed(rows.assign(machine_noise_relative_iqr=[0.04, 0.02, 0.09])))
    assert noise.machine_noise == (0.02, 0.04, 0.09)
    assert noise.table["machine's IQR / median"].tolist() == ["2.0%", "4.0%"]
    # A column blank in every row shown is left out (the flagged table ran off the page).
    blank = quality.quality(timed(rows.assign(median_ci95_coverage=np.nan)))
    assert "CI coverage" not in blank.table and "flag" in blank.table
    shown = quality.quality(timed(rows.assign(median_ci95_coverage=[0.9, np.nan, 0.95])))
    assert shown.table["CI coverage"].tolist() == ["", "90.0%"]


# --- speed-ups ------------------------------------------------------------------------------


def test_speedup_panels_hold_every_cell_of_their_optimization(summary):
    panels = {(p.framework, p.optimization): p for p in speedup.panels(summary)}
    # Eager has no panel, nor xla (its only timing has no eager baseline).
    assert set(panels) == {("pytorch", "torchscript"), ("pytorch", "compile"),
                           ("tensorflow", "graph")}
    compiled = panels["pytorch", "compile"]
    assert compiled.speedup.columns.tolist() == [8, 16]
    assert compiled.speedup.iloc[0, 0] == pytest.approx(4.0)
    assert np.isnan(compiled.speedup.iloc[0, 1])
    assert compiled.timed.iloc[0].tolist() == [True, False]
    assert panels["pytorch", "torchscript"].wrong.iloc[0].tolist() == [False, True]
    graph = panels["tensorflow", "graph"]
    assert graph.timed.iloc[0].tolist() == [True, True]  # 16 ran, without a baseline
    assert np.isnan(graph.speedup.iloc[0, 1])
    # The colour scale holds the largest speed-up (8×) on a log2 scale.
    assert speedup.scale(summary) == pytest.approx(3.0)
    assert speedup.scale(frame(cell(median=10.0), cell(optimization="x", median=9.0))) == (
        pytest.approx(math.log2(speedup.MIN_SCALE)))


def test_overview_geometric_mean_compile_time_and_verdict(summary):
    view = speedup.overview(summary, several_devices=False)
    table = view.table
    assert view.other_framework == 1  # PyTorch's graph: another framework's optimization
    rows = table.set_index(["framework", "optimization"])
    assert "device" not in table
    # torchscript: 2× at length 8, and 8× at 16 with a wrong answer, which does not count.
    torchscript = rows.loc[("PyTorch", "torchscript")]
    assert torchscript["speed-up over eager"] == "2.00× (range 2.00–2.00)"
    assert torchscript["wrong answers left out"] == "✗ 1"
    assert torchscript["averaged over"] == "1 cells"
    assert torchscript["correctness"] == "✗ 1 of 2 outside tolerance"
    assert torchscript["compile time (s)"] == "2.00"  # the median of 1 and 3
    assert torchscript["max rel error"] == "5.0e-01"
    assert torchscript["cells"] == "2 of 2"
    assert rows.loc[("PyTorch", "compile"), "cells"] == "1 of 2"
    assert rows.loc[("PyTorch", "compile"), "wrong answers left out"] == "0"
    assert rows.loc[("PyTorch", "eager"), "speed-up over eager"] == "1 (the baseline)"
    assert rows.loc[("PyTorch", "eager"), "correctness"] == "✓ all 2 within tolerance"
    assert rows.loc[("TensorFlow", "graph"), "speed-up over eager"] == "5.00× (range 5.00–5.00)"
    xla = rows.loc[("TensorFlow", "xla")]
    assert xla["speed-up over eager"] == "— (no eager baseline)"
    assert xla["correctness"] == "not checked"
    # Length 16: torchscript's answer is wrong and graph has no baseline there, so only
    # length 8 has a valid speed-up of every compared optimization; nothing is left out
    # that any of them had.
    assert view.common == {"cpu": [("bert", 1, 8)]}
    assert view.left_out.empty


def test_wrong_answers_do_not_count_in_the_overview():
    rows = frame(cell(median=10.0), cell(optimization="fast", median=1.0, within=False),
                 cell(median=10.0, seqlen=16), cell(optimization="fast", median=5.0, seqlen=16))
    row = speedup.overview(rows, False).table.set_index("optimization").loc["fast"]
    assert row["speed-up over eager"] == "2.00× (range 2.00–2.00)"  # not the wrong 10×
    assert row["wrong answers left out"] == "✗ 1"
    only_wrong = frame(cell(median=10.0), cell(optimization="fast", median=1.0, within=False))
    row = speedup.overview(only_wrong, False).table.set_index("optimization").loc["fast"]
    assert row["speed-up over eager"] == "— (every speed-up came with a wrong answer)"


def test_cells_above_a_ceiling_do_not_count_in_the_overview():
    """A torchscript cell 10× faster than eager but above its ceiling (the machine's peak
    or its framework's own GEMM: efficiency.with_ceilings) is a measurement problem: its
    speed-up is left out and counted apart, as a wrong answer's is."""
    rows = frame(cell(median=10.0), cell(optimization="fast", median=1.0),
                 cell(median=10.0, seqlen=16), cell(optimization="fast", median=5.0, seqlen=16))
    assert "above a ceiling" not in " ".join(speedup.overview(rows, False).table.columns)
    rows["above_ceiling"] = rows["optimization"].eq("fast") & rows["seqlen"].eq(8)
    row = speedup.overview(rows, False).table.set_index("optimization").loc["fast"]
    assert row["speed-up over eager"] == "2.00× (range 2.00–2.00)"  # not the impossible 10×
    assert row[speedup.ABOVE] == 1 and row["wrong answers left out"] == "0"
    rows["above_ceiling"] = rows["optimization"].eq("fast")
    row = speedup.overview(rows, False).table.set_index("optimization").loc["fast"]
    assert row["speed-up over eager"] == "— (every speed-up was above a ceiling or wrong)"
    # An eager baseline above its ceiling makes its size's speed-up meaningless too.
    rows["above_ceiling"] = rows["optimization"].eq("eager") & rows["seqlen"].eq(16)
    row = speedup.overview(rows, False).table.set_index("optimization").loc["fast"]
    assert row["speed-up over eager"] == "10.00× (range 10.00–10.00)"  # length 8's alone


def test_overview_averages_over_the_cells_every_optimization_measured():
    """compile ran out of memory at length 16: every row's average is over length 8 only,
    and the table says which cells were left out and why."""
    rows = frame(cell(median=10.0), cell(median=40.0, seqlen=16),
                 cell(optimization="torchscript", median=5.0),
                 cell(optimization="torchscript", median=10.0, seqlen=16),
                 cell(optimization="compile", median=2.5),
                 cell(optimization="compile", status="oom", reason="x", seqlen=16),
                 cell("tensorflow", median=8.0), cell("tensorflow", median=16.0, seqlen=16),
                 cell("tensorflow", "graph", 4.0), cell("tensorflow", "graph", 4.0, seqlen=16))
    view = speedup.overview(rows, several_devices=False)
    table = view.table.set_index(["framework", "optimization"])
    assert table.loc[("PyTorch", "torchscript"), "speed-up over eager"] == "2.00× (range 2.00–2.00)"
    assert table.loc[("TensorFlow", "graph"), "speed-up over eager"] == "2.00× (range 2.00–2.00)"
    assert table.loc[("PyTorch", "compile"), "averaged over"] == "1 cells"
    assert view.common == {"cpu": [("bert", 1, 8)]}
    assert view.left_out.to_dict("records") == [
        {"device": "cpu", "model": "bert", "batch": 1, "seqlen": 16,
         "missing": "PyTorch compile"}]


def test_overview_names_why_an_optimization_never_ran():
    rows = frame(cell(median=10.0),
                 cell(optimization="compile", status="oom", reason="out of host memory"),
                 cell(optimization="compile", status="oom", reason="x", seqlen=16))
    view = speedup.overview(rows, several_devices=True)
    row = view.table.set_index("optimization").loc["compile"]
    assert view.other_framework == 0
    assert row["cells"] == "0 of 2" and row["speed-up over eager"] == "N/A (out of memory)"
    assert row["device"] == "cpu" and row["correctness"] == ""


def test_geomean_ignores_missing_values():
    assert speedup.geomean(pd.Series([1.0, 4.0, np.nan, 16.0])) == pytest.approx(4.0)
    assert np.isnan(speedup.geomean(pd.Series([np.nan])))


# --- compile time, correctness, GPU, start-up ------------------------------------------------


def test_compile_tables(summary):
    table = compilation.compile_times(timed(summary), several_devices=False)
    torchscript = table.set_index(["framework", "optimization"]).loc[("PyTorch", "torchscript")]
    assert torchscript["cells"] == 2
    assert torchscript["prepare (s)"] == "1.50"
    assert torchscript["first call (s)"] == "0.25"
    assert torchscript["slowest cell (s)"] == "3.00"
    assert torchscript["compile time (s)"] == "2.00"
    assert table.set_index("optimization").loc["graph", "compile time (s)"] == ""
    per_model = compilation.compile_per_model(timed(summary), several_devices=True)
    assert per_model.columns.tolist() == ["framework", "optimization", "device", "bert"]
    assert per_model.set_index("optimization").loc["compile", "bert"] == "9.00"
    assert compilation.compile_times(
        timed(frame(cell(median=1.0, compile_s=0.001))), False)["compile time (s)"].tolist() == [
        "<0.01"]


def test_correctness_tables(summary):
    errors = correctness.errors(timed(summary), several_devices=False)
    rows = errors.set_index(["framework", "optimization"])
    assert ("TensorFlow", "xla") not in rows.index  # not checked
    assert rows.loc[("PyTorch", "torchscript"), "outside tolerance"] == "✗ 1"
    assert rows.loc[("PyTorch", "eager"), "outside tolerance"] == "0"
    assert rows.loc[("PyTorch", "torchscript"), "max abs error"] == "5.0e+00"
    wrong = correctness.wrong_answers(timed(summary))
    assert wrong["cell_id"].tolist() == ["pytorch_bert_cpu_b1_s16_torchscript"]
    table = correctness.wrong_answer_table(wrong)
    assert table.iloc[0].tolist() == ["pytorch_bert_cpu_b1_s16_torchscript", "8.00×", "5.00",
                                      "5.0e+00", "5.0e-01", "1.0e-04"]


def test_wrong_answers_largest_speedup_first():
    rows = frame(cell(median=10.0), cell(optimization="a", median=5.0, within=False),
                 cell(optimization="b", median=2.0, within=False),
                 cell(optimization="c", median=20.0, within=False))
    assert correctness.wrong_answers(timed(rows))["optimization"].tolist() == ["b", "a", "c"]


def test_gpu_table_shows_gpu_cells_only():
    rows = frame(cell(median=10.0), cell(median=2.0, device="gpu", device_time_median_ms=1.5,
                                         device_allocated_peak_mb=1234.4))
    gpu_cells = gpu.gpu_cells(timed(rows))
    table = gpu.gpu_table(gpu_cells)
    assert table.columns.tolist() == ["cell", "host median ms", "device median ms",
                                      "allocated peak MiB"]
    assert table.iloc[0].tolist() == ["pytorch_bert_gpu_b1_s8_eager", "2.00", "1.50", "1,234"]


def test_startup_counts_only_the_first_cell_of_each_process():
    cells = [
        cell(median=1.0, imports_done_s=4.0, cold_start_s=1.0, process_position=0),
        cell(median=1.0, seqlen=2, imports_done_s=6.0, cold_start_s=3.0, process_position=0),
        cell(median=1.0, seqlen=3, imports_done_s=0.1, cold_start_s=0.1, process_position=1,
             process_cells=2),
    ]
    rows = frame(*cells)
    assert startup.grouped(timed(rows)).tolist() == [False, False, True]
    table = startup.startup(timed(rows))
    assert table.columns.tolist() == ["scenario", "model", "framework", "optimization", "cells",
                                      "imports done (s)", "cold call (s)"]
    assert table.iloc[0].tolist() == ["inference", "bert", "PyTorch", "eager", 2, "5.00", "2.00"]
    # Another workload of the same framework and recipe is a row of its own.
    other = frame(*cells, cell(median=1.0, model="cnn", imports_done_s=9.0, cold_start_s=7.0,
                               process_position=0))
    table = startup.startup(timed(other)).set_index("model")
    assert table.loc["bert", "cold call (s)"] == "2.00" and table.loc["cnn", "cells"] == 1
    assert startup.startup(timed(frame(cell(status="error", reason="x")))) is None


def test_startup_shows_what_a_warm_parents_import_cost_beside_what_its_jobs_paid():
    rows = frame(
        cell(median=1.0, imports_done_s=0.5, process_position=0,
             process_warm_parent_imports_s=3.0),
        cell(median=1.0, seqlen=2, imports_done_s=0.7, process_position=0,
             process_warm_parent_imports_s=3.4),
    )
    row = startup.startup(timed(rows)).iloc[0]
    assert (row["imports done (s)"], row[startup.PARENT_COLUMN]) == ("0.60", "3.20")
    assert startup.PARENT_COLUMN not in startup.startup(timed(frame(cell(median=1.0))))


# --- every framework against the fastest ------------------------------------------------------


def test_ratio_sets_each_frameworks_best_right_answer_against_the_fastest(summary):
    ratios = ratio.against_fastest(timed(summary)).set_index(["seqlen", "framework"])
    assert set(ratios["precision"]) == {"fp32"}
    # Length 8: PyTorch's best is compile (2.5 ms) of 3 candidates, the fastest; TensorFlow's
    # graph (4 ms) of 2. (No intervals in this summary: no verdict but the fastest.)
    assert ratios.loc[(8, "pytorch"), ["ratio", "verdict", "text"]].tolist() == [
        1.0, "fastest", "fastest: compile"]
    assert ratios.loc[(8, "tensorflow"), "ratio"] == pytest.approx(4.0 / 2.5)
    assert ratios.loc[(8, "tensorflow"), "text"] == "1.60 graph"
    assert ratios.loc[(8, "tensorflow"), "verdict"] is None
    assert (ratios.loc[(8, "pytorch"), "candidates"],
            ratios.loc[(8, "tensorflow"), "candidates"]) == (3, 2)
    assert set(ratios.xs(8, level="seqlen")["fastest"]) == {"pytorch"}
    # Length 16: torchscript (5 ms) is wrong, so PyTorch's best is eager (40 ms); xla (16 ms)
    # beats graph (30 ms) although unchecked, and is the fastest.
    assert ratios.loc[(16, "pytorch"), "ratio"] == pytest.approx(40.0 / 16.0)
    assert (ratios.loc[(16, "pytorch"), "optimization"],
            ratios.loc[(16, "tensorflow"), "optimization"]) == ("eager", "xla")
    table = ratio.ratio_table(ratios.reset_index())
    assert table.columns.tolist() == ["model, batch", "framework", "seqlen 8", "seqlen 16"]
    assert table.values.tolist() == [
        ["bert, batch 1", "PyTorch", "fastest: compile", "2.50 eager"],
        ["bert, batch 1", "TensorFlow", "1.60 graph", "fastest: xla"]]
    grid = ratio.ratio_grid(ratios.reset_index())
    assert grid.index.tolist() == ["bert, batch 1 · PyTorch", "bert, batch 1 · TensorFlow"]
    assert grid.values.ravel().tolist() == pytest.approx([1.0, 2.5, 1.6, 1.0])
    assert ratio.tally(ratios.reset_index()) == {"no interval": 2}
    assert ratio.candidates(timed(summary)) == {
        "pytorch": ["compile", "eager", "torchscript"], "tensorflow": ["eager", "graph", "xla"]}


def with_ci(median: float, low: float, high: float) -> dict:
    return {"median_ci95_ms_low": low, "median_ci95_ms_high": high}


def test_ratio_compares_equal_precisions_with_intervals_and_ties():
    """A PyTorch bf16 cell is no rival of a TensorFlow fp32 one: each precision has its own
    comparison, the interval comes from the two medians' intervals, and an interval that
    holds 1 is a tie."""
    rows = frame(
        cell("pytorch", "eager", 10.0, **with_ci(10.0, 9.5, 10.5)),
        cell("pytorch", "eager-bf16", 4.0, **with_ci(4.0, 3.9, 4.1)),
        cell("tensorflow", "eager", 10.2, **with_ci(10.2, 9.8, 10.6)),
        cell("pytorch", "eager", 10.0, seqlen=16, **with_ci(10.0, 9.9, 10.1)),
        cell("tensorflow", "eager", 20.0, seqlen=16, **with_ci(20.0, 19.0, 21.0)),
    )
    ratios = ratio.against_fastest(timed(rows)).set_index(["seqlen", "framework"])
    assert set(ratios["precision"]) == {"fp32"}  # no TensorFlow bf16: no bf16 comparison
    tie = ratios.loc[(8, "tensorflow")]
    assert tie["optimization"] == "eager" and tie["ratio"] == pytest.approx(10.2 / 10)
    assert (tie["ratio_low"], tie["ratio_high"]) == pytest.approx((9.8 / 10.5, 10.6 / 9.5))
    assert tie["verdict"] == "tie" and tie["text"] == "tie: 1.02 (0.93–1.12) eager"
    slower = ratios.loc[(16, "tensorflow")]
    assert slower["verdict"] == "slower" and slower["text"] == "2.00 (1.88–2.12) eager"
    assert ratios.loc[(16, "pytorch"), "verdict"] == "fastest"
    assert ratio.tally(ratios.reset_index()) == {"tie: PyTorch, TensorFlow": 1,
                                                  "PyTorch fastest": 1}
    assert ratio.ties(ratios.reset_index()).loc["bert, batch 1 · TensorFlow"].tolist() == [
        True, False]
    both = frame(cell("pytorch", "eager-bf16", 4.0, **with_ci(4.0, 3.9, 4.1)),
                 cell("tensorflow", "eager-bf16", 8.0, **with_ci(8.0, 7.9, 8.1)),
                 cell("tensorflow", "eager", 1.0, **with_ci(1.0, 0.9, 1.1)))
    assert ratio.precisions(ratio.against_fastest(timed(both))) == ["bf16"]


def test_with_two_frameworks_the_ratio_is_the_two_framework_ratio_of_old():
    """The slower framework's ratio and interval are slower/faster: the PyTorch/TensorFlow
    ratio and interval (dlbench.analysis.uncertainty) where TensorFlow is the faster, their
    reciprocals where PyTorch is; the verdict is the old one."""
    rng = np.random.default_rng(7)
    for seqlen in range(1, 41):
        pt, tf = rng.uniform(1, 3, 2)
        spread = rng.uniform(0.01, 0.3, 4)
        pt_ci = (pt * (1 - spread[0]), pt * (1 + spread[1]))
        tf_ci = (tf * (1 - spread[2]), tf * (1 + spread[3]))
        rows = frame(cell("pytorch", "eager", pt, seqlen=seqlen, **with_ci(pt, *pt_ci)),
                     cell("tensorflow", "eager", tf, seqlen=seqlen, **with_ci(tf, *tf_ci)))
        ratios = ratio.against_fastest(timed(rows)).set_index("framework")
        old, low, high = uncertainty.ratio_interval(pt, *pt_ci, tf, *tf_ci)
        old_verdict = uncertainty.verdict(low, high, "pytorch", "tensorflow")
        slower = "tensorflow" if pt < tf else "pytorch"
        row = ratios.loc[slower]
        if slower == "pytorch":
            assert (row["ratio"], row["ratio_low"], row["ratio_high"]) == pytest.approx(
                (old, low, high))
        else:
            assert (row["ratio"], row["ratio_low"], row["ratio_high"]) == pytest.approx(
                (1 / old, 1 / high, 1 / low))
        assert ratios.loc["pytorch" if slower == "tensorflow" else "tensorflow",
                          "verdict"] == "fastest"
        assert row["verdict"] == ("tie" if old_verdict == "tie" else "slower")


def test_ratio_of_the_same_recipe_on_every_side(summary):
    ratios = ratio.against_fastest(timed(summary), recipes=["eager"])
    assert ratios[["seqlen", "framework", "optimization"]].values.tolist() == [
        [8, "pytorch", "eager"], [8, "tensorflow", "eager"]]
    assert ratios["ratio"].tolist() == pytest.approx([1.0, 20.0 / 10.0])


def test_ratio_needs_two_frameworks_on_the_same_cell():
    rows = frame(cell("pytorch", median=1.0), cell("tensorflow", median=2.0, seqlen=16))
    assert ratio.against_fastest(timed(rows)).empty
    assert ratio.against_fastest(timed(frame(cell("pytorch", median=1.0)))).empty


def test_ratio_labels_name_the_device_when_there_are_several():
    rows = frame(cell("pytorch", median=1.0), cell("tensorflow", median=2.0),
                 cell("pytorch", median=1.0, device="gpu"),
                 cell("tensorflow", median=4.0, device="gpu"))
    ratios = ratio.against_fastest(timed(rows))
    assert sorted(set(ratios["label"])) == ["bert, batch 1 (cpu)", "bert, batch 1 (gpu)"]
    assert sorted(ratios["ratio"]) == pytest.approx([1.0, 1.0, 2.0, 4.0])


# --- a scenario without a section of its own -------------------------------------------------


def test_generic_table_of_a_scenario_with_its_parameters():
    rows = frame(
        {"cell_id": "e1", "scenario": "echo", "framework": "pytorch", "device": "cpu",
         "optimization": "eager", "payload_kib": 64, "mode": "fast", "status": "ok",
         "reason": None, "median_ms": 2.0, "p99_ms": 3.0, "p90_ms": 2.5, "bytes_per_s": 1e6,
         "iterations": 10, "relative_iqr": 0.1, "utilization_samples": 5, "env_torch": "2"},
        {"cell_id": "e2", "scenario": "echo", "framework": "pytorch", "device": "cpu",
         "optimization": "eager", "payload_kib": 8, "mode": "fast", "status": "oom",
         "reason": "too big", "median_ms": np.nan},
        cell(median=1.0),  # inference: its batch and length are not echo's
    )
    echo = of_scenario(rows, "echo")
    assert generic.parameter_columns(echo) == ["framework", "device", "optimization",
                                               "payload_kib", "mode"]
    table = generic.scenario_table(echo)
    assert table.columns.tolist() == ["framework", "device", "optimization", "payload_kib",
                                      "mode", "status", "reason", "median ms", "p90 ms",
                                      "p99 ms", "bytes/s"]
    assert table["payload_kib"].tolist() == [8, 64]  # sorted by the parameters
    assert table.iloc[0][["status", "reason", "median ms"]].tolist() == ["oom", "too big", ""]
    assert table.iloc[1][["median ms", "p90 ms", "p99 ms", "bytes/s"]].tolist() == [
        "2.00", "2.50", "3.00", "1,000,000"]


# --- plots ----------------------------------------------------------------------------------


def test_plots_draw_on_the_given_axes(summary):
    from matplotlib.figure import Figure

    figure = plots.latency_vs_length(timed(summary), Figure())
    assert len(figure.axes) == 1  # one model, one batch size
    lines = [line for line in figure.axes[0].get_lines() if len(line.get_xdata())]
    assert len(lines) == 6  # PyTorch eager, torchscript, compile; TensorFlow eager, graph, xla
    assert figure.legends and "PyTorch" in [t.get_text() for t in figure.legends[0].texts]
    # Within a decade, a log axis labels minor ticks too: as numbers, not raw mathtext (the
    # report turns mathtext off).
    within = timed(summary).assign(median_ms=lambda d: 12 + d["seqlen"] / d["seqlen"].max())
    figure = plots.latency_vs_length(within, Figure())
    figure.canvas.draw()
    labels = [t.get_text() for t in figure.axes[0].yaxis.get_ticklabels(which="both")]
    assert [text for text in labels if text] and not [text for text in labels if "$" in text]
    for panel in speedup.panels(summary):
        ax = Figure(figsize=plots.speedup_size(panel)).subplots()
        assert plots.speedup_heatmap(ax, panel, speedup.scale(summary), False) is ax
    texts = [t.get_text() for t in ax.texts]  # TensorFlow graph: 5×, and 16 ran unbaselined
    assert texts[:1] == ["5.00"] and ax.get_title() == "TensorFlow graph vs TensorFlow eager"
    compiled = next(p for p in speedup.panels(summary) if p.optimization == "compile")
    ax = plots.speedup_heatmap(Figure().subplots(), compiled, 2.0, True)
    assert "N/A" in [t.get_text() for t in ax.texts] and "(cpu)" in ax.get_title()
    ratios = ratio.against_fastest(timed(summary))
    grid = ratio.ratio_grid(ratios)
    ax = plots.ratio_heatmap(Figure(figsize=plots.ratio_size(grid)).subplots(), grid,
                             ratio.verdict_grid(ratios))
    # Rows PyTorch, TensorFlow; columns lengths 8, 16; the fastest squares are marked.
    assert sorted(t.get_text() for t in ax.texts if t.get_text()) == [
        "1.60", "2.50", "fastest", "fastest"]
    # The colour bar's labels: each ratio once, at its place (a narrow scale's rounded
    # logarithms read "1×, 1×, 1.1×, 1.1×").
    for scale in (grid, grid.clip(upper=1.3)):
        colorbar = plots.ratio_heatmap(Figure().subplots(), scale).collections[0].colorbar
        labels = [t.get_text() for t in colorbar.ax.get_yticklabels()]
        assert len(labels) > 2 and len(set(labels)) == len(labels), labels
        places = [2 ** t for t in colorbar.get_ticks()]
        assert [float(text.rstrip("×")) for text in labels] == pytest.approx(places), labels


# --- uncertainty ------------------------------------------------------------------------------


def test_a_ratio_is_a_tie_exactly_when_the_intervals_overlap():
    rng = np.random.default_rng(3)
    for _ in range(500):
        a, b = rng.uniform(1, 2, 2)
        a_low, a_high = a * (1 - rng.uniform(0, 0.2)), a * (1 + rng.uniform(0, 0.2))
        b_low, b_high = b * (1 - rng.uniform(0, 0.2)), b * (1 + rng.uniform(0, 0.2))
        r, low, high = uncertainty.ratio_interval(a, a_low, a_high, b, b_low, b_high)
        assert low <= r <= high
        tie = uncertainty.verdict(low, high, "a faster", "b faster") == uncertainty.TIE
        assert tie == bool(uncertainty.overlap(a_low, a_high, b_low, b_high))
    assert uncertainty.verdict(float("nan"), 1.0, "x", "y") is None
    assert uncertainty.verdict(0.5, 0.9, "x", "y") == "x"
    assert uncertainty.verdict(1.1, 1.3, "x", "y") == "y"
    # Arrays too: the summary's columns.
    ratios, lows, highs = uncertainty.ratio_interval([2.0, 1.0], [1.9, 0.0], [2.1, 1.1],
                                                      [1.0, 1.0], [0.9, 0.9], [1.1, 1.1])
    assert ratios.tolist() == [2.0, 1.0] and np.isnan(lows[1])


# --- memory by phase, mixed precision, compile graphs -----------------------------------------


def test_memory_table_shows_the_steady_state_beside_the_load_peak():
    rows = frame(
        cell("tensorflow", median=5.0, peak_host_rss_mb=1796.0, load_peak_mb=1796.0,
             resident_after_model_mb=900.0, first_call_peak_mb=950.0, steady_peak_mb=940.0),
        cell("tensorflow", median=9.0, seqlen=48, peak_host_rss_mb=1796.0, load_peak_mb=1796.0,
             resident_after_model_mb=900.0, first_call_peak_mb=1000.0, steady_peak_mb=1010.0,
             sampled_peak_rss_mb=2500.0),
        cell("pytorch", median=3.0, peak_host_rss_mb=600.0),  # measured before phases
    )
    table = memory.memory_table(timed(rows))
    assert table.columns.tolist() == ["framework", "optimization", "model", "batch", "seqlen",
                                      "load peak", "model resident", "first call peak",
                                      "steady peak", "steady − model"]
    assert table[["seqlen", "steady peak", "steady − model"]].values.tolist() == [
        [8, "940", "40"], [48, "1,010", "110"]]
    summary = memory.load_versus_steady(timed(rows)).set_index("framework")
    assert summary.loc["TensorFlow", "load peak"] == "1,796"
    assert summary.loc["TensorFlow", "steady − model"] == "75"
    # The process's own peak, and its tree's where the supervisor sampled it (an H100's
    # compile cell: 1,195 MiB in the process, 6,952 with torch.compile's 16 workers).
    assert summary.loc["TensorFlow", "whole-cell peak"] == "1,796"
    assert summary.loc["TensorFlow", "with its child processes (sampled)"] == "2,500"
    assert memory.memory_table(timed(frame(cell(median=1.0, peak_host_rss_mb=5.0)))) is None


def test_memory_measured_after_other_cells_of_its_process_is_not_the_cells_own():
    """A cell that followed others in its process (per_group) found their memory still
    held: its host figures are blank ('—'), and the growth per 1,000 tokens is fitted over
    the cells that started their processes only (with the borrowed figures the default
    run's slopes came out negative: −253 MiB per 1,000 tokens for JAX eager)."""
    own = dict(process_position=0, first_in_process=True)
    rows = frame(
        cell("jax", median=5.0, seqlen=16, peak_host_rss_mb=1900.0, load_peak_mb=1900.0,
             resident_after_model_mb=1100.0, steady_peak_mb=1150.0, **own),
        cell("jax", median=9.0, seqlen=64, peak_host_rss_mb=1950.0, load_peak_mb=1950.0,
             resident_after_model_mb=1100.0, steady_peak_mb=1250.0, **own),
        # after the cells above: their memory, not its own
        cell("jax", median=7.0, batch=2, seqlen=64, peak_host_rss_mb=1950.0,
             load_peak_mb=1950.0, resident_after_model_mb=1940.0, steady_peak_mb=1945.0,
             process_position=2, first_in_process=False),
    )
    assert (~memory.own_host_memory(timed(rows))).sum() == 1
    assert timed(rows).loc[2, ["load_peak_mb", "steady_peak_mb"]].isna().all()
    table = memory.memory_table(timed(rows)).set_index(["batch", "seqlen"])
    assert table.index.tolist() == [(1, 16), (1, 64)]  # not the borrowed one
    assert table.loc[(1, 64), "steady − model"] == "150"
    # Two sizes of its own: a line through them, not a growth told from the noise.
    assert memory.sizes_of_their_own(timed(rows)) == 2
    assert memory.per_token(timed(rows)).iloc[0]["MiB per 1k tokens"] == "—"
    # A record without the combined flag: its process position decides.
    alone = frame(cell("jax", median=5.0, load_peak_mb=900.0, process_position=1))
    assert alone["load_peak_mb"].isna().all()


def test_float32_ops_per_framework_and_precision():
    rows = frame(
        cell("pytorch", "eager-bf16", 2.0, precision="bf16",
             mixed_precision_float32_ops="aten.native_layer_norm; aten.add",
             mixed_precision_reduced_ops="aten.addmm"),
        cell("pytorch", "compile-bf16", 1.0, precision="bf16",
             mixed_precision_float32_ops="aten.native_layer_norm; aten.gelu",
             mixed_precision_reduced_ops="aten.addmm"),
        cell("tensorflow", "eager-bf16", 3.0, precision="bf16",
             mixed_precision_float32_ops="Mean", mixed_precision_reduced_ops="MatMul"),
        cell("tensorflow", "eager", 3.0),
    )
    table = precision.float32_ops(timed(rows)).set_index("framework")
    assert table.loc["PyTorch", "in float32"] == "aten.add, aten.gelu, aten.native_layer_norm"
    assert table.loc["PyTorch", "cells"] == 2
    assert table.loc["TensorFlow", "in the reduced type"] == "MatMul"
    assert precision.float32_ops(timed(frame(cell(median=1.0)))) is None


def test_cells_that_allowed_tf32_outside_the_tf32_precision():
    rows = frame(cell(median=1.0, arithmetic_tf32=False),
                 cell("tensorflow", median=1.0, arithmetic_tf32=True),
                 cell("pytorch", "eager-tf32", 1.0, device="gpu", arithmetic_tf32=True))
    assert precision.tf32_cells(timed(rows))["cell_id"].tolist() == [
        "tensorflow_bert_cpu_b1_s8_eager"]


def test_compile_graphs_table_puts_split_models_first():
    rows = frame(cell(optimization="compile", median=1.0, compilation_graphs=1,
                      compilation_graph_breaks=0, compilation_recompiles=0),
                 cell(optimization="compile", median=1.0, seqlen=16, compilation_graphs=3,
                      compilation_graph_breaks=2, compilation_recompiles=0,
                      compilation_break_reasons="print"),
                 cell(median=2.0))
    table = compilation.graphs(timed(rows))
    assert table["cell"].tolist() == ["pytorch_bert_cpu_b1_s16_compile",
                                      "pytorch_bert_cpu_b1_s8_compile"]
    assert table["one graph"].tolist() == ["✗", "✓"]
    assert compilation.graphs(timed(frame(cell(median=1.0)))) is None


def test_a_figures_words_show_the_tick_labels_as_drawn_raw_mathtext_too():
    """The control of the report's plain-numbers check (tests/test_report_three_frameworks):
    a log axis left to matplotlib's own labels shows `$\\mathdefault{…}$` where mathtext is
    off, as the report has it, and a figure's words carry that text, minor ticks included."""
    import matplotlib.pyplot as plt

    from dlbench.report.display import describe
    fig, ax = plt.subplots()
    with plt.rc_context({"text.parse_math": False}):
        ax.plot([1, 2, 4], [3, 4, 5])
        ax.set(xscale="log", yscale="log", xlabel="batch size", ylabel="tokens/s")
        words = describe(fig)
    assert "x: batch size [" in words and "mathdefault" in words
    plt.close(fig)


def test_a_figure_in_words():
    import matplotlib.pyplot as plt

    from dlbench.report.display import describe
    fig, (left, right) = plt.subplots(1, 2)
    left.plot([1, 2], label="PyTorch eager")
    left.set(title="bert, batch 1", xlabel="sequence length (tokens)", ylabel="latency (ms)")
    left.legend()
    right.set(title="bert, batch 2", xlabel="sequence length (tokens)")
    fig.suptitle("Latency")
    left.set_xticks([0, 1], ["8", "16"])
    # The ticks shown: those inside the axis's limits (the locator proposes wider ones).
    assert describe(fig) == ("Figure 'Latency'. bert, batch 1; x: sequence length (tokens) "
                             "[8, 16]; y: latency (ms) [1.0, 1.2, 1.4, 1.6, 1.8, 2.0]; "
                             "legend: PyTorch eager. bert, batch 2; x: sequence length "
                             "(tokens) [0.0, 0.2, 0.4, 0.6, 0.8, 1.0].")
    plt.close(fig)


def test_the_reports_process_reads_the_scenarios_that_the_derived_summary_has(tmp_path):
    """The report composes its sections from two columns of the summary
    (analysis.present.scenarios_in), not from the derived summary: the same scenarios, the
    cells that aggregation left out not counted, a cell without one in inference."""
    from dlbench.analysis.present import scenarios_in
    from dlbench.records import origin

    rows = pd.DataFrame([
        cell("pytorch", "eager", 10.0) | {"scenario": None, origin.LEFT_OUT: False},
        cell("pytorch", "eager", 1.0) | {"scenario": "zeta", "cell_id": "z",
                                         origin.LEFT_OUT: False},
        cell("pytorch", "eager", 1.0) | {"scenario": "training", "cell_id": "t",
                                         origin.LEFT_OUT: True},
        cell("pytorch", "eager", 1.0) | {"scenario": "generation", "cell_id": "g",
                                         origin.LEFT_OUT: None},
    ])
    path = tmp_path / "summary.parquet"
    rows.to_parquet(path)
    assert scenarios_in(path) == scenarios(load(path)) == ["inference", "generation", "zeta"]
    # A summary from before scenarios and origins: its cells are inference's.
    rows.drop(columns=["scenario", origin.LEFT_OUT]).to_parquet(path)
    assert scenarios_in(path) == scenarios(load(path)) == ["inference"]
