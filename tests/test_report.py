"""render(): the head, a section per scenario and the tail, executed by papermill on a
synthetic summary with two scenarios, one of them without a section of its own."""

import json

import numpy as np
import pandas as pd
import pytest

from dlbench.report import render, section_files
from dlbench.report.format import fmt_ms
from tests import report_html
from tests.conftest import REPO
from tests.test_analysis import cell


@pytest.fixture(scope="module")
def rendered(tmp_path_factory):
    """The summary, the executed notebook and the HTML of a report on inference and echo."""
    folder = tmp_path_factory.mktemp("report")
    spread = {"relative_iqr": 0.02, "iterations": 50, "imports_done_s": 3.0,
              "cold_start_s": 0.5, "compile_s": 0.4, "p90_ms": 30.0, "peak_host_rss_mb": 900.0,
              "load_peak_mb": 900.0, "resident_after_model_mb": 500.0,
              "first_call_peak_mb": 560.0, "steady_peak_mb": 540.0}
    rows = [
        cell("pytorch", "eager", 10.0, **spread),
        cell("pytorch", "eager", 12.5, batch=2, **spread),
        cell("pytorch", "torchscript", 5.0, **spread),
        cell("pytorch", "torchscript", 6.25, batch=2, within=False, rel_error=0.3, **spread),
        cell("tensorflow", "eager", 20.0, **spread),
        cell("tensorflow", "eager", status="oom", reason="out of host memory", batch=2),
        cell("tensorflow", "graph", 4.0, **spread),
        cell("tensorflow", "graph", 8.0, batch=2, **spread),
        cell("tensorflow", "torchscript", status="unsupported",
             reason="torchscript does not exist in TensorFlow"),
        cell("tensorflow", "torchscript", status="unsupported", batch=2,
             reason="torchscript does not exist in TensorFlow"),
    ]
    rows = [r | {"scenario": "inference"} for r in rows]
    rows += [
        {"cell_id": f"echo_{size}", "scenario": "echo", "framework": "pytorch",
         "device": "cpu", "optimization": "eager", "payload_kib": size, "status": "ok",
         "reason": None, "median_ms": 0.5 * size, "p99_ms": 0.75 * size,
         "bytes_per_s": 2048e3 / 0.5}
        for size in (1, 4)
    ] + [{"cell_id": "echo_1024", "scenario": "echo", "framework": "pytorch", "device": "cpu",
          "optimization": "eager", "payload_kib": 1024, "status": "error",
          "reason": "EchoError: too long", "median_ms": np.nan}]
    summary = pd.DataFrame(rows)
    path = folder / "summary.parquet"
    summary.to_parquet(path, index=False)
    executed, html = folder / "logs" / "report.ipynb", folder / "report.html"
    render(REPO / "workflow" / "notebooks" / "report.py", path, executed, html)
    return summary, json.loads(executed.read_text()), html.read_text()


def test_no_cell_fails(rendered):
    _, notebook, _ = rendered
    outputs = [o for c in notebook["cells"] for o in c.get("outputs", [])]
    assert outputs and not [o for o in outputs if o["output_type"] == "error"]
    assert not [o for o in outputs if o.get("name") == "stderr"]


def test_sections_in_order(rendered):
    _, _, html = rendered
    headings = report_html.headings(html)
    order = ["Status overview", "Inference: a transformer's forward pass",
             "Median latency per framework (ms)", "PyTorch — eager", "Speed-up over eager",
             "PyTorch / TensorFlow latency ratio", "Scenario echo", "Measurement quality",
             "Start-up cost"]
    assert [headings.index(h) for h in order] == sorted(headings.index(h) for h in order)
    assert "import pandas" not in html and "dlbench.analysis" not in html  # no code


def test_inference_latency_tables_show_the_medians(rendered):
    summary, _, html = rendered
    sheets = {heading: report_html.sheet(rows) for heading, rows in report_html.tables(html)
              if heading and " — " in heading}
    inference = summary[summary["scenario"].eq("inference")]
    shown = wrongs = 0
    for row in inference.itertuples():
        label = {"pytorch": "PyTorch", "tensorflow": "TensorFlow"}[row.framework]
        heading = f"{label} — {row.optimization}"
        if row.framework == "tensorflow" and row.optimization == "torchscript":
            assert heading not in sheets  # one line: every cell N/A for one reason
            continue
        text = sheets[heading][row.model, str(int(row.batch)), f"seqlen {int(row.seqlen)}"]
        if row.status == "ok":
            assert text.split()[0] == fmt_ms(row.median_ms)
            wrong = not pd.isna(row.correctness_within_tolerance) and not bool(
                row.correctness_within_tolerance)
            assert text.endswith("✗") == wrong
            wrongs += wrong
            shown += 1
        else:
            assert text == "N/A (out of memory)"
    assert (shown, wrongs) == (7, 1)
    assert "All 2 cells N/A — unsupported: torchscript does not exist in TensorFlow" in html


def test_speedup_and_ratio_tables(rendered):
    _, _, html = rendered
    tables = report_html.tables(html)
    overview = next(rows for h, rows in tables if h.startswith("Speed, compile time"))
    header = overview[0]
    rows = {(r[0] or "PyTorch" if r[1] != "graph" else "TensorFlow", r[1]): dict(
        zip(header, r, strict=True)) for r in overview[1:]}
    # torchscript: 10/5 = 2 and 12.5/6.25 = 2, one of them a wrong answer.
    assert rows["PyTorch", "torchscript"]["speed-up over eager"] == "2.00× (2.00–2.00)"
    assert rows["PyTorch", "torchscript"]["wrong answers left out"] == "✗ 1"
    assert rows["PyTorch", "torchscript"]["correctness"] == "✗ 1 of 2 outside tolerance"
    assert rows["TensorFlow", "graph"]["speed-up over eager"] == "5.00× (5.00–5.00)"
    ratio = next(rows for h, rows in tables if h.startswith("fp32: float32 throughout"))
    # Batch 1: torchscript 5 ms against graph 4 ms; batch 2: torchscript is wrong, so
    # PyTorch's eager (12.5 ms) against graph (8 ms). (No intervals here: no verdicts.)
    assert ratio[1:] == [["bert, batch 1", "1.25 torchscript vs graph"],
                         ["bert, batch 2", "1.56 eager vs graph"]]
    assert "The rules this report compares by" in report_html.headings(html)
    memory = next(rows for h, rows in tables if h == "Memory by phase")
    assert memory[0][:2] == ["framework", "optimization"] and "steady − model" in memory[0]


def test_echo_has_the_generic_table(rendered):
    _, _, html = rendered
    echo = [rows for heading, rows in report_html.tables(html) if heading == "Scenario echo"]
    assert len(echo) == 1
    header, *rows = echo[0]
    assert header == ["framework", "device", "optimization", "payload_kib", "status", "reason",
                      "median ms", "p99 ms", "bytes/s"]
    assert rows == [["pytorch", "cpu", "eager", "1", "ok", "", "0.500", "0.750", "4,096,000"],
                    ["pytorch", "cpu", "eager", "4", "ok", "", "2.00", "3.00", "4,096,000"],
                    ["pytorch", "cpu", "eager", "1024", "error", "EchoError: too long", "",
                     "", ""]]


def test_every_image_decodes(rendered):
    _, _, html = rendered
    sizes = report_html.images(html)
    # Speed-up heatmaps of torchscript and graph, latency against length, the ratio heatmap.
    assert len(sizes) == 4
    assert all(width > 100 and height > 100 for width, height in sizes)


def test_sections_follow_the_scenario_names():
    notebook = REPO / "workflow/notebooks/report.py"
    sections = notebook.parent / "sections"
    files = section_files(notebook, ["inference", "echo", "../report", "generic", "_tail"])
    assert files == [(sections / "inference.py", None), (sections / "generic.py", "echo"),
                     (sections / "generic.py", "../report"), (sections / "generic.py", "generic"),
                     (sections / "generic.py", "_tail"), (sections / "_efficiency.py", None),
                     (sections / "_tail.py", None)]
