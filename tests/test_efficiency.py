"""The efficiency analysis on a hand-made summary and hand-made peak files: FLOPs per
iteration, achieved FLOP/s, the matching peak (device, precision, threads) and its share;
the table, the per-optimization view and the roofline figure."""

import json

import matplotlib
import numpy as np
import pandas as pd
import pytest

from dlbench.analysis import efficiency, roofline
from dlbench.measure import flops
from tests.test_analysis import cell, frame

matplotlib.use("Agg")

BERT = "bert-base-uncased"
BERT_FLOPS = flops.forward_flops(BERT, 1, 128)
CNN_STEP = flops.step_flops("training", "cnn", 64)


def _peak(folder, device, precision, threads, gflops=None, reason=None, hardware="hw1",
          own=None):
    """A peak file as `dlbench peak` joins it: the best library's figure, the libraries
    (`own`: each framework's default library's rate; the best is oneDNN's, above both)."""
    path = folder / f"{device}_{precision}_t{threads}.json"
    own = own or {}
    record = {"kind": "gemm_peak", "device": device, "precision": precision,
              "threads": threads, "status": "ok" if gflops else "unsupported",
              "reason": reason, "environment": {"hardware_fingerprint": hardware},
              "theoretical": {"gflops": None, "label": "unknown", "reason": "no clock"},
              "framework_gemm": {fw: {"library": key, "gflops": rate}
                                 for fw, (key, rate) in own.items()},
              "libraries": {key: {"library": key, "name": key, "framework": fw,
                                  "default": True, "status": "ok", "reason": None,
                                  "gflops": rate, "median_gflops": rate * 0.9,
                                  "size": 2048} for fw, (key, rate) in own.items()}}
    if gflops:
        record |= {"gflops": gflops, "library": "torch-onednn",
                   "library_name": "PyTorch → oneDNN"}
        record["libraries"]["torch-onednn"] = {
            "library": "torch-onednn", "name": "PyTorch → oneDNN", "framework": "pytorch",
            "default": False, "status": "ok", "reason": None, "gflops": gflops,
            "median_gflops": gflops * 0.9, "size": 2048}
    path.write_text(json.dumps(record))
    return path


PEAK = BERT_FLOPS / 1e9 / 0.05  # 447 GFLOP/s: oneDNN's; MKL's half, TensorFlow's a quarter
OWN = {"pytorch": ("torch-linear", PEAK / 2), "tensorflow": ("tf-matmul", PEAK / 4)}


@pytest.fixture
def peak_files(tmp_path):
    return [_peak(tmp_path, "cpu", "fp32", 2, gflops=PEAK, own=OWN),
            _peak(tmp_path, "cpu", "bf16", 2, reason="this CPU has no native bf16 arithmetic")]


@pytest.fixture
def peaks(peak_files):  # 447 GFLOP/s in fp32
    return efficiency.load_peaks(peak_files)


@pytest.fixture
def cells(peaks):
    same = {"intra_op_threads": 2, "env_hardware_fingerprint": "hw1"}
    summary = frame(
        # 100 ms for 22.3 GFLOP: half the fp32 peak.
        cell("pytorch", "eager", 100.0, model=BERT, seqlen=128, **same),
        # A wrong answer keeps its rate, marked.
        cell("tensorflow", "graph", 50.0, model=BERT, seqlen=128, within=False, **same),
        cell("pytorch", "eager-bf16", 80.0, model=BERT, seqlen=128, **same),
        # Four threads: no peak was measured for them.
        cell("tensorflow", "eager", 40.0, model=BERT, seqlen=128, intra_op_threads=4),
        cell("pytorch", "compile", status="oom", reason="out of memory", model=BERT,
             seqlen=128),
        cell("pytorch", "eager", 10.0, model="not-in-the-registry", **same),
        # A training step: 50 ms at the median, 80 ms over the wall time (some steps wait).
        cell("pytorch", "eager", 50.0, model="cnn", batch=64, seqlen=np.nan,
             scenario="training", within=None, intra_op_threads=2, optimizer="sgd",
             dataset="synthetic", pipeline="w0", wall_step_ms=80.0,
             wall_step_ms_ci95_low=70.0, wall_step_ms_ci95_high=90.0,
             env_hardware_fingerprint="hw2"),
    )
    summary["scenario"] = summary["scenario"].fillna("inference")
    return efficiency.efficiency(summary, peaks)


def test_flops_rates_and_fractions_of_the_matching_peak(cells):
    by = cells.set_index(["framework", "optimization", "scenario"])
    assert len(cells) == 5  # the oom cell and the unknown model are left out
    eager = by.loc[("pytorch", "eager", "inference")]
    assert eager["flops"] == BERT_FLOPS
    assert eager["achieved_gflops"] == pytest.approx(BERT_FLOPS / 0.1 / 1e9)
    assert eager["fraction_of_peak"] == pytest.approx(0.5)
    assert by.loc[("tensorflow", "graph", "inference"), "fraction_of_peak"] == pytest.approx(1)
    # The training step: 3 forward passes of the batch, against the same fp32 peak, over the
    # wall time per step (the images over the wall time), not the median step.
    training = by.loc[("pytorch", "eager", "training")]
    assert training["flops"] == CNN_STEP
    assert training["fraction_of_peak"] == pytest.approx(CNN_STEP / 0.08 / 1e9 / 447.0, 1e-3)
    bf16 = by.loc[("pytorch", "eager-bf16", "inference")]
    assert bf16["peak_status"] == "unsupported" and np.isnan(bf16["fraction_of_peak"])
    four = by.loc[("tensorflow", "eager", "inference")]
    assert four["threads"] == 4 and np.isnan(four["peak_gflops"])


def test_each_cell_is_set_against_its_own_frameworks_gemm(cells, peaks):
    assert peaks.set_index("precision").loc["fp32", "peak_library"] == "PyTorch → oneDNN"
    by = cells.set_index(["framework", "optimization", "scenario"])
    eager = by.loc[("pytorch", "eager", "inference")]
    assert eager["own_gemm_gflops"] == PEAK / 2
    assert eager["fraction_of_own_gemm"] == pytest.approx(1)  # half the peak, MKL's rate
    # TensorFlow's own library does a quarter of the peak: its cell at the peak is 4×.
    graph = by.loc[("tensorflow", "graph", "inference")]
    assert graph["own_gemm_gflops"] == PEAK / 4
    assert graph["fraction_of_own_gemm"] == pytest.approx(4 * graph["fraction_of_peak"])


def _pytorch_bert(**rates: float) -> pd.DataFrame:
    """PyTorch BERT base inference cells (b1 s128, 2 threads), one per optimization, each
    timed at the given multiple of PyTorch's own GEMM rate (MKL's)."""
    own_s = BERT_FLOPS / 1e9 / OWN["pytorch"][1]
    return frame(*(cell("pytorch", optimization, 1e3 * own_s / rate, model=BERT, seqlen=128,
                        intra_op_threads=2) for optimization, rate in rates.items())
                 ).assign(scenario="inference")


def test_a_recipe_that_runs_another_library_is_set_against_that_ones_rate(peaks):
    """PyTorch's onednn runs its linear layers in oneDNN, not MKL: at 1.5 times MKL's
    rate (PyTorch's default library's) it is below oneDNN's, and not above its ceiling;
    eager at the same speed is."""
    summary = _pytorch_bert(onednn=1.5, eager=1.5)
    cells = efficiency.efficiency(summary, peaks).set_index("optimization")
    assert cells.loc["onednn", "own_gemm_gflops"] == PEAK  # oneDNN's, the peak's library
    assert cells.loc["eager", "own_gemm_gflops"] == OWN["pytorch"][1]
    assert cells["above_own_gemm"].to_dict() == {"onednn": False, "eager": True}


def test_a_cell_above_the_peak_is_flagged_with_its_numbers(peaks):
    """A TensorFlow cell at 146% of the peak (issue 17's figure) is a measurement
    problem, shown with its time, rate and the peak's library; one just below 100% is
    not flagged (PyTorch's, at 99% of its own GEMM)."""
    peak_s = BERT_FLOPS / 1e9 / peaks.set_index("precision").loc["fp32", "peak_gflops"]
    summary = frame(
        cell("tensorflow", "graph", 1e3 * peak_s / 1.46, model=BERT, seqlen=128,
             intra_op_threads=2),
        cell("pytorch", "eager", 1e3 * peak_s / 0.495, model=BERT, seqlen=128,
             intra_op_threads=2)).assign(scenario="inference")
    cells = efficiency.efficiency(summary, peaks)
    assert cells.set_index("framework")["above_peak"].to_dict() == {
        "tensorflow": True, "pytorch": False}
    assert cells.set_index("framework")["above_ceiling"].to_dict() == {
        "tensorflow": True, "pytorch": False}
    above = efficiency.above_peak(cells)
    assert len(above) == 1
    row = above.iloc[0]
    assert (row["framework"], row["% of peak"]) == ("TensorFlow", "146.0%")
    assert row["peak GFLOP/s"] == "447 (PyTorch → oneDNN)"
    assert row["achieved GFLOP/s"] == "653"
    table = efficiency.table(cells, several_devices=False).set_index("framework")
    assert table.loc["TensorFlow", "% of peak"] == "146.0% ⚠ above the peak"
    assert table.loc["PyTorch", "% of peak"] == "49.5%"
    assert table.loc["PyTorch", "% of own GEMM"] == "99.0%"


def test_a_cell_above_its_own_frameworks_gemm_is_flagged_and_never_wins(peaks, peak_files):
    """Issue 38: PyTorch's cells stood at 117-123% of PyTorch's own GEMM (measured on one
    core) while below the machine's peak. A cell faster than the product its own layers
    run is a measurement problem: flagged, listed, left out of the averages, and it does
    not win the answer — the runner-up does."""
    from dlbench.analysis import headline

    summary = _pytorch_bert(eager=1.20, torchscript=0.90)
    cells = efficiency.efficiency(summary, peaks).set_index("optimization")
    assert not cells["above_peak"].any()  # 60% of the machine's peak
    assert cells["above_own_gemm"].to_dict() == {"eager": True, "torchscript": False}
    listed = efficiency.above_peak(cells.reset_index())
    assert listed[["optimization", "% of own GEMM"]].values.tolist() == [["eager", "120.0%"]]
    table = efficiency.table(cells.reset_index(), several_devices=False).set_index(
        "optimization")
    assert table.loc["eager", "% of own GEMM"] == "120.0% ⚠ above it"
    view = efficiency.by_optimization(cells.reset_index(), several_devices=False)
    assert view["optimization"].tolist() == ["torchscript"]
    answer = headline.winners(efficiency.with_ceilings(summary, peak_files))["inference"]
    row = answer.iloc[0]
    assert row["fastest"] == "PyTorch torchscript"
    assert row["faster but wrong"] == "⚠ above its ceiling PyTorch eager"
    # Without the peaks nothing is known to be above a ceiling: eager wins.
    assert headline.winners(summary)["inference"].iloc[0]["fastest"] == "PyTorch eager"


def test_the_answer_counts_the_cells_above_the_peak(peaks, peak_files):
    from dlbench.analysis import headline

    summary = frame(cell("tensorflow", "graph", 1.0, model=BERT, seqlen=128,
                         intra_op_threads=2)).assign(scenario="inference")
    assert efficiency.count_above_peak(summary, peak_files) == 1
    kind = "above a ceiling (the machine's peak or its own GEMM)"
    kinds = headline.attention(summary, 1).set_index("kind")
    assert kinds.loc[kind, "section"] == headline.EFFICIENCY
    assert kind not in headline.attention(summary, 0)["kind"].tolist()


def test_every_library_and_the_theoretical_figure_are_listed(peak_files):
    listed = efficiency.libraries(peak_files)
    fp32 = listed[listed["precision"].eq("fp32")]
    assert fp32["library"].tolist() == ["PyTorch → oneDNN", "torch-linear", "tf-matmul",
                                        "theoretical (unknown)"]
    assert fp32["peak"].tolist() == ["✓ best", "", "", ""]
    assert fp32["default of"].tolist() == ["", "PyTorch", "TensorFlow", ""]
    assert fp32["GFLOP/s"].tolist() == ["447", "223", "112", "unknown"]
    assert efficiency.theory(peak_files[:1]) == [
        "Theoretical peak, cpu fp32 ×2 threads: unknown (no clock)."]
    record = json.loads(peak_files[0].read_text())
    record["busy_libraries"] = ["tf-matmul"]
    peak_files[0].write_text(json.dumps(record))
    warning, _ = efficiency.theory(peak_files[:1])
    assert warning.startswith("**⚠ Measured on a busy machine (cpu fp32 ×2 threads): "
                              "tf-matmul got fewer cores")


def test_a_library_above_the_theoretical_peak_is_said_with_its_units(tmp_path):
    """The note that a library measured above the theoretical figure (peak.combine writes
    it) starts its sentence in upper case and keeps its units as written: 'GFLOP/s' and
    'MHz', not 'gflop/s' and 'mhz' (str.capitalize lowercased them). Below it: no note."""
    from dlbench.run import peak
    from tests.test_peak import _library

    def written(gflops):
        records = [_library("torch-linear", gflops)]
        for record in records:
            record["theoretical"] |= {"formula": "2 cores × 2,000 MHz × 50",
                                      "assumptions": ["2 FMA units"]}
        path = tmp_path / f"peak_{gflops:g}.json"
        path.write_text(json.dumps(peak.combine(records, "cpu", "fp32", 2)))
        return path

    [above] = efficiency.theory([written(300.0)])
    assert "**The measured 300.0 GFLOP/s is above it: the cores ran at ≥ 3,000 MHz" in above
    assert "gflop" not in above and "mhz" not in above
    [below] = efficiency.theory([written(150.0)])
    assert "above it" not in below and below.endswith("Assumptions: 2 FMA units.")


def test_a_setting_is_named_and_a_whole_number_has_no_decimals():
    """A generation's new tokens, stored as a float beside other scenarios' cells, read
    'new_tokens 32', not a bare '32.0'."""
    assert efficiency._setting("new_tokens", 32.0) == "new_tokens 32"
    assert efficiency._setting("dataset", "digits") == "dataset digits"


def test_table_shows_rates_peaks_and_reasons(cells):
    table = efficiency.table(cells, several_devices=False).set_index(
        ["scenario", "framework", "optimization"])
    assert table.loc[("inference", "PyTorch", "eager"), "% of peak"] == "50.0%"
    assert table.loc[("inference", "PyTorch", "eager"), "GFLOP / iteration"] == "22.3"
    assert table.loc[("inference", "TensorFlow", "graph"), "achieved GFLOP/s"].endswith("✗")
    assert table.loc[("inference", "PyTorch", "eager-bf16"), "peak GFLOP/s"].startswith(
        "N/A (this CPU has no native bf16")
    assert table.loc[("inference", "TensorFlow", "eager"), "peak GFLOP/s"] == \
        "N/A (not measured)"
    assert table.loc[("training", "PyTorch", "eager"), "length"] == ""
    assert table.loc[("training", "PyTorch", "eager"), "settings"] == (
        "dataset synthetic, pipeline w0, optimizer sgd")
    assert table.loc[("inference", "PyTorch", "eager"), "settings"] == ""
    assert "device" not in table


def test_small_shares_keep_two_significant_digits():
    assert [efficiency.fmt_share(v) for v in (0.5, 0.0123, 0.000123, np.nan)] == \
        ["50.0%", "1.2%", "0.012%", ""]


def test_per_optimization_view_and_other_hardware(cells):
    view = efficiency.by_optimization(cells, several_devices=False)
    row = view[view["optimization"].eq("eager") & view["scenario"].eq("inference")
               & view["framework"].eq("PyTorch")].iloc[0]
    assert (row["cells"], row["median % of peak"]) == (1, "50.0%")
    # TensorFlow graph's only cell was a wrong answer: no rate to count.
    assert not (view["framework"].eq("TensorFlow") & view["optimization"].eq("graph")).any()
    assert efficiency.other_hardware(cells) == 1  # the training cell ran on hw2


def test_the_roofline_draws_every_cell_and_the_ceilings(cells, peaks):
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots()
    roofline.roofline(ax, cells, peaks)
    points = sum(len(c.get_offsets()) for c in ax.collections)
    assert points == len(cells)
    ceilings = [line.get_ydata()[0] for line in ax.get_lines()]
    assert ceilings == [pytest.approx(447.0, rel=1e-3)]  # the unsupported bf16 has none
    plt.close(fig)


def test_without_peaks_the_rates_have_no_ceiling(cells):
    none = efficiency.load_peaks([])
    assert none.empty
    assert efficiency.efficiency(
        frame(cell("pytorch", "eager", 100.0, model=BERT, seqlen=128)), none
    )["fraction_of_peak"].isna().all()


def test_the_report_shows_the_section_with_its_table_and_figure(tmp_path):
    """The real notebook, rendered by papermill: the section follows the scenarios', its
    tables hold every cell and every library, a cell above the peak is flagged (and not
    explained away), and its figure is embedded."""
    from dlbench.report import render
    from tests import report_html
    from tests.conftest import REPO

    summary = frame(
        cell("pytorch", "eager", 100.0, model=BERT, seqlen=128, intra_op_threads=2),
        cell("pytorch", "eager", 30.0, model=BERT, seqlen=32, intra_op_threads=2),
        cell("tensorflow", "eager", 250.0, model=BERT, seqlen=128, intra_op_threads=2),
        # 22.3 GFLOP in 25 ms: 894 GFLOP/s, twice the peak.
        cell("tensorflow", "graph", 25.0, model=BERT, seqlen=128, intra_op_threads=2),
    ).assign(scenario="inference")
    path = tmp_path / "summary.parquet"
    summary.drop(columns=["precision", "timed", "checked", "wrong_answer", "profiled",
                          "eager_ms", "speedup"]).to_parquet(path, index=False)
    peak = _peak(tmp_path, "cpu", "fp32", 2, gflops=BERT_FLOPS / 1e9 / 0.05, own=OWN)
    html_path = tmp_path / "report.html"
    render(REPO / "workflow/notebooks/report.py", path, tmp_path / "report.ipynb", html_path,
           [peak])
    html = html_path.read_text()
    headings = report_html.headings(html)
    section = headings.index("Efficiency against the machine's limit")
    assert headings.index("Median latency per framework (ms)") < section
    assert section < headings.index("Measurement quality")
    shown = {caption: rows for caption, rows in report_html.tables(html)
             if caption == "Efficiency against the machine's limit"}
    assert shown
    texts = [" ".join(row) for _, rows in report_html.tables(html) for row in rows]
    assert any("50.0%" in text and "447" in text for text in texts)
    assert any("200.0% ⚠ above the peak" in text for text in texts)
    assert ("1 cells are above the measured peak or their own framework's matrix product: "
            "a measurement problem") in html
    assert "Cells above the machine's measured peak or their own GEMM" in html
    # Counted among the cells that need a look.
    assert "1 above a ceiling (the machine's peak or its own GEMM)" in html
    assert any("894" in text and "447 (PyTorch → oneDNN)" in text for text in texts)
    assert any("PyTorch → oneDNN" in text and "✓ best" in text for text in texts)
    assert "busier" not in html
    assert len(report_html.images(html)) >= 1


def test_an_older_peak_record_shows_its_one_library(tmp_path):
    """A peak file from before the libraries (torch.matmul's median alone) still reads."""
    path = tmp_path / "old.json"
    path.write_text(json.dumps({"kind": "gemm_peak", "device": "cpu", "precision": "fp32",
                                "threads": 2, "status": "ok", "reason": None,
                                "gflops": 198.0, "size": 2048}))
    listed = efficiency.libraries([path])
    assert listed["GFLOP/s"].tolist() == ["198", "unknown"]
    assert listed["library"].iloc[0].startswith("torch.matmul (an older record")
    assert efficiency.load_peaks([path])["peak_gflops"].tolist() == [198.0]


def test_a_generation_cell_counts_its_whole_generation_and_its_phases(peaks):
    """The generation scenario counts its own work (prefill and steps, the scenario's
    `iteration_flops`), and its prefill and decoding step get their own rates: a decoding
    step's share of the peak is far below the prefill's."""
    counted = flops.generation_flops("gpt2", 1, 32, 16)
    summary = frame(cell("pytorch", "eager", 300.0, model="gpt2", seqlen=32,
                         intra_op_threads=2, scenario="generation", new_tokens=16,
                         generation_first_token_ms=30.0, generation_per_token_ms=18.0))
    cells = efficiency.efficiency(summary, peaks)
    assert len(cells) == 1
    assert cells.iloc[0]["flops"] == pytest.approx(counted["total"])
    assert cells.iloc[0]["achieved_gflops"] == pytest.approx(counted["total"] / 0.3 / 1e9)
    phased = efficiency.phases(cells).set_index("median ms")
    assert list(phased.index) == ["30.0", "18.0"]
    prefill, step = phased.loc["30.0"], phased.loc["18.0"]
    assert prefill["phase"] == "prefill (first token)"
    assert prefill["gflops"] == pytest.approx(counted["prefill"] / 0.03 / 1e9)
    mean_step = sum(counted["steps"]) / len(counted["steps"])
    assert step["gflops"] == pytest.approx(mean_step / 0.018 / 1e9)
    assert "decoding step (mean of 15;" in step["phase"]
    assert step["gflops"] < prefill["gflops"] / 5
    # other scenarios time no phases apart
    bert = frame(cell("pytorch", "eager", 100.0, model=BERT, seqlen=128, intra_op_threads=2))
    assert efficiency.phases(efficiency.efficiency(bert.assign(scenario="inference"),
                                                   peaks)).empty
