"""render(): the head, a section per scenario and the tail, executed by papermill on a
synthetic summary with two scenarios, one of them without a section of its own, and
cells of every status, kind and two precisions."""

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from bs4 import BeautifulSoup

from dlbench.format import fmt_ms, na
from dlbench.records import origin, provenance
from dlbench.report import render, section_files
from tests import report_html
from tests.conftest import REPO
from tests.test_analysis import cell

SPREAD = {"relative_iqr": 0.02, "iterations": 50, "imports_done_s": 3.0, "cold_start_s": 0.5,
          "compile_s": 0.4, "p90_ms": 30.0, "peak_host_rss_mb": 900.0, "load_peak_mb": 900.0,
          "resident_after_model_mb": 500.0, "first_call_peak_mb": 560.0}


BF16 = {"optimization_precision": "bf16", "correctness_precision": "bf16",
        "correctness_tolerance": 2e-2}


def timed(framework, optimization, median, batch=1, seqlen=8, **extra) -> dict:
    """A timed inference cell: a ±3% interval, a steady peak growing with its input."""
    return cell(framework, optimization, median, batch=batch, seqlen=seqlen,
                median_ci95_ms_low=0.97 * median, median_ci95_ms_high=1.03 * median,
                steady_peak_mb=500.0 + 5.0 * batch * seqlen, **SPREAD | extra)


def fixture_summary() -> pd.DataFrame:
    """Inference cells of every kind — ok, out of memory, unsupported, not applicable by
    design, error, unstable, a wrong answer — in fp32 and bf16, and an echo scenario
    without a section of its own."""
    unstable = {"relative_iqr": 0.3, "flags_unstable": True,
                "flags_reasons": "unstable: IQR is 30% of the median (limit 10%)"}
    rows = [
        timed("pytorch", "eager", 10.0),
        timed("pytorch", "eager", 12.5, batch=2, **unstable),
        timed("pytorch", "eager", 20.0, seqlen=32),
        timed("pytorch", "torchscript", 5.0),
        timed("pytorch", "torchscript", 6.25, batch=2, within=False, rel_error=0.3),
        cell("pytorch", "compile", status="error", reason="RuntimeError: inductor failed"),
        cell("pytorch", "graph", status="unsupported",
             reason="optimization 'graph' does not exist in PyTorch (only in TensorFlow)"),
        timed("pytorch", "eager-bf16", 7.0, **BF16),
        timed("pytorch", "eager-bf16", 9.0, batch=2, **BF16),
        timed("tensorflow", "eager", 20.0),
        cell("tensorflow", "eager", status="oom", reason="out of host memory", batch=2),
        timed("tensorflow", "graph", 4.0),
        timed("tensorflow", "graph", 8.0, batch=2),
        timed("tensorflow", "graph", 19.5, seqlen=32),
        timed("tensorflow", "eager-bf16", 6.9, **BF16),
        cell("tensorflow", "xla", status="unsupported", reason="XLA needs a GPU here"),
        *(cell("tensorflow", "torchscript", status="unsupported", batch=b,
               reason="optimization 'torchscript' does not exist in TensorFlow")
          for b in (1, 2)),
    ]
    rows = [r | {"scenario": "inference", "env_git_commit": "0123abc", "env_fingerprint": "f00d",
                 "env_packages_hash": r["framework"][:2] * 8} for r in rows]
    rows += [
        {"cell_id": f"echo_{size}", "scenario": "echo", "framework": "pytorch",
         "device": "cpu", "optimization": "eager", "payload_kib": size, "status": "ok",
         "reason": None, "median_ms": 0.5 * size, "p99_ms": 0.75 * size,
         "bytes_per_s": 2048e3 / 0.5}
        for size in (1, 4)
    ] + [{"cell_id": "echo_1024", "scenario": "echo", "framework": "pytorch", "device": "cpu",
          "optimization": "eager", "payload_kib": 1024, "status": "error",
          "reason": "EchoError: too long", "median_ms": np.nan}]
    return pd.DataFrame(rows)


def rendered_files(folder: Path) -> tuple[Path, Path]:
    """Where render_fixture(folder) leaves the executed notebook and the HTML."""
    return folder / "logs" / "report.ipynb", folder / "report.html"


def render_fixture(folder: Path) -> tuple[pd.DataFrame, Path, Path]:
    """The fixture summary with its provenance in folder, rendered: (summary, the executed
    notebook, the HTML). Once per test run: the `fixture_report` fixture (tests/conftest.py)."""
    summary = fixture_summary()
    path = folder / "summary.parquet"
    summary.to_parquet(path, index=False)
    provenance.write(folder / provenance.NAME, CONFIG, ["config/presets/optimizations.yaml"])
    executed, html = rendered_files(folder)
    render(REPO / "workflow" / "notebooks" / "report.py", path, executed, html)
    return summary, executed, html


CONFIG = {"frameworks": ["pytorch", "tensorflow"], "devices": ["cpu"],
          "inference": {"models": ["bert"], "batch_sizes": [1, 2], "sequence_lengths": [8, 32],
                        "optimizations": {"pytorch": ["eager", "torchscript"],
                                          "tensorflow": ["eager", "graph"]}}}


@pytest.fixture(scope="module")
def rendered(fixture_report):
    """The summary, the executed notebook and the HTML of the fixture's report."""
    summary, executed, html = fixture_report
    return summary, json.loads(executed.read_text()), html.read_text()


def test_no_cell_fails(rendered):
    _, notebook, _ = rendered
    outputs = [o for c in notebook["cells"] for o in c.get("outputs", [])]
    assert outputs and not [o for o in outputs if o["output_type"] == "error"]
    assert not [o for o in outputs if o.get("name") == "stderr"]


def test_sections_in_order(rendered):
    _, _, html = rendered
    headings = report_html.headings(html)
    order = ["The answer", "Status overview", "Inference: a transformer's forward pass",
             "Median latency per framework (ms)", "PyTorch — eager", "Speed-up over eager",
             "Latency against the fastest framework", "Memory by phase",
             "Memory against input size", "Throughput against batch size and sequence length",
             "Scenario echo", "Measurement quality", "Start-up cost", "Reproduce"]
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
        if row.optimization in {"pytorch": ["graph"], "tensorflow": ["torchscript"]}[
                row.framework]:
            assert heading not in sheets  # not applicable by design: no sheet
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
            assert text == na(row.status, row.reason)
    assert (shown, wrongs) == (12, 1)
    assert "does not exist in" not in html.split("Inference: a transformer")[1]


def test_speedup_and_ratio_tables(rendered):
    _, _, html = rendered
    tables = report_html.tables(html)
    overview = next(rows for h, rows in tables if h.startswith("Speed, compile time"))
    header = overview[0]
    rows = {(r[0] or "PyTorch" if r[1] != "graph" else "TensorFlow", r[1]): dict(
        zip(header, r, strict=True)) for r in overview[1:]}
    # torchscript: 10/5 = 2 and 12.5/6.25 = 2, one of them a wrong answer.
    assert rows["PyTorch", "torchscript"]["speed-up over eager"] == "2.00× (range 2.00–2.00)"
    assert rows["PyTorch", "torchscript"]["wrong answers left out"] == "✗ 1"
    assert rows["PyTorch", "torchscript"]["correctness"] == "✗ 1 of 2 outside tolerance"
    assert rows["TensorFlow", "graph"]["speed-up over eager"] == "5.00× (range 5.00–5.00)"
    ratio = next(rows for h, rows in tables if h.startswith("fp32: float32 throughout"))
    # TensorFlow's graph is the fastest everywhere. Batch 1: PyTorch's torchscript 5 ms
    # against graph 4 ms; batch 2: torchscript is wrong, so PyTorch's eager (12.5 ms)
    # against graph (8 ms); length 32: inside the noise.
    assert ratio[1:] == [
        ["bert, batch 1", "PyTorch", "1.25 (1.18–1.33) torchscript",
         "tie: 1.03 (0.97–1.09) eager"],
        ["bert, batch 1", "TensorFlow", "fastest: graph", "fastest: graph"],
        ["bert, batch 2", "PyTorch", "1.56 (1.47–1.66) eager", "—"],
        ["bert, batch 2", "TensorFlow", "fastest: graph", "—"]]
    bf16 = next(rows for h, rows in tables if h.startswith("bf16: bfloat16"))
    assert bf16[1:] == [["bert, batch 1", "PyTorch", "tie: 1.01 (0.96–1.08) eager-bf16"],
                        ["bert, batch 1", "TensorFlow", "fastest: eager-bf16"]]
    assert "The rules this report compares by" in report_html.headings(html)
    memory = next(rows for h, rows in tables if h == "Memory by phase")
    assert memory[0][:2] == ["framework", "optimization"] and "steady − model" in memory[0]


def table_under(html: str, heading: str, index: int = 0) -> list[list[str]]:
    """The rows of the index-th table under a heading."""
    return [rows for h, rows in report_html.tables(html) if h == heading][index]


def test_the_answer_comes_first(rendered):
    _, _, html = rendered
    headings = report_html.headings(html)
    assert headings.index("The answer") == 1
    header, *rows = table_under(html, "The answer")
    assert header[:4] == ["model", "batch", "seqlen", "fastest"]
    assert [r[:8] for r in rows] == [
        ["bert", "1", "8", "TensorFlow graph", "fp32", "4.000", "✓", "1.25× (1.18–1.33)"],
        ["bert", "1", "32", "TensorFlow graph", "fp32", "19.500", "✓",
         "tie: 1.03× (0.97–1.09)"],
        ["bert", "2", "8", "TensorFlow graph", "fp32", "8.000", "✓", "1.12× (1.06–1.19)"]]
    assert rows[2][-1] == "✗ PyTorch torchscript"  # faster, but a wrong answer: no win
    # Each framework's best beside the verdict; at batch 2 PyTorch's right answers are
    # eager only (its torchscript answer was wrong), TensorFlow's include graph.
    bests = [[r[header.index(f"{name}'s best")] for name in ("PyTorch", "TensorFlow")]
             for r in rows]
    assert bests[0] == ["torchscript (fp32): 5.000 ms, 1.25× (1.18–1.33)",
                        "graph (fp32): 4.000 ms, the fastest"]
    unequal = [r[header.index("recipes compared")] for r in rows]
    assert unequal == ["", "⚠ unequal: PyTorch eager only; TensorFlow compiled (graph)",
                       "⚠ unequal: PyTorch eager only; TensorFlow compiled (graph)"]
    assert "nan" not in " ".join(" ".join(r) for r in rows).lower()
    assert "⚠ 2 of 3 inference answers compare unequal recipes" in " ".join(
        BeautifulSoup(html, "html.parser").get_text(" ").split())
    soup = BeautifulSoup(html, "html.parser")
    counts = next(p for p in soup.find_all("p") if p.get_text().startswith("Cells that need"))
    text = " ".join(counts.get_text().split())
    for kind in ("1 unstable or flagged", "1 wrong answer", "2 failed (error)",
                 "1 out of memory", "1 unsupported", "3 not applicable by design"):
        assert kind in text
    assert {a["href"] for a in counts.find_all("a")} == {
        "#Measurement-quality", "#Correctness", "#Status-overview"}


def test_every_link_has_its_target_and_the_contents_list_every_section(rendered):
    _, _, html = rendered
    soup = BeautifulSoup(html, "html.parser")
    ids = {tag["id"] for tag in soup.find_all(id=True)}
    links = [a["href"] for a in soup.find_all("a", href=True) if a["href"].startswith("#")]
    assert links and all(link[1:] in ids for link in links)
    contents = {a.get_text() for a in soup.find("nav", id="contents").find_all("a")}
    sections = {report_html._text(h) for h in soup.find_all(["h1", "h2"])[1:]}
    assert contents == sections
    assert {"Memory against input size", "Throughput against batch size and sequence length",
            "Reproduce", "Status overview"} <= contents


def test_offline_and_printable(rendered):
    _, _, html = rendered
    soup = BeautifulSoup(html, "html.parser")
    remote = [t.get("src") or t.get("href") for t in soup.find_all(["script", "link", "img"])
              if (t.get("src") or t.get("href") or "").startswith(("http", "//"))]
    assert remote == []
    assert "@media print" in html


def test_status_counts_cells_not_applicable_once(rendered):
    _, _, html = rendered
    counts, untimed = (table_under(html, "Status overview", i) for i in (0, 1))
    assert counts[0] == ["framework", "ok", "oom", "unsupported", "error", "not applicable",
                         "total"]
    assert counts[-1] == ["total", "14", "1", "1", "2", "3", "21"]
    assert [r[1] for r in untimed[1:]] == ["error", "error", "oom", "unsupported"]
    assert "3 cells of a framework with an optimization that only other frameworks have" in html


def test_memory_and_throughput_against_input_size(rendered):
    _, _, html = rendered
    header, *rows = table_under(html, "Memory against input size")
    assert header[:4] == ["model", "batch", "length", "batch × length"]
    assert [r[:4] for r in rows] == [["bert", "1", "8", "8"], ["bert", "1", "32", "32"],
                                     ["bert", "2", "8", "16"]]
    assert rows[2][header.index("TensorFlow eager")] == "OOM"
    assert rows[2][header.index("TensorFlow graph")] == "580"  # 500 + 5 × 16
    per_sample = table_under(html, "Memory against input size", 1)
    assert per_sample[0][3:] == ["model resident", "MiB per 1k tokens", "±"]
    assert len(per_sample) == 1 + 6  # the six framework × optimization with a timing
    graph = next(r for r in per_sample[1:] if r[1:3] == ["TensorFlow", "graph"])
    assert graph[4:] == ["5,000.0", "0.0"]  # 5 MiB a token at 8, 16 and 32 tokens
    header, *rows = table_under(html, "Throughput against batch size and sequence length")
    assert [r[:3] for r in rows] == [["bert", "1", "8"], ["bert", "1", "32"], ["bert", "2", "8"]]
    assert rows[2][header.index("TensorFlow graph")] == "250 (243–258)"
    assert rows[2][header.index("PyTorch torchscript")] == ""  # a wrong answer


def test_reproduce_gives_command_config_and_identities(rendered):
    _, _, html = rendered
    after = BeautifulSoup(html.split('id="Reproduce"')[1], "html.parser").get_text()
    assert "snakemake --cores all --configfile config.yaml" in after
    assert "pytorch: [eager, torchscript]" in after  # the config as YAML
    values = dict(table_under(html, "Reproduce")[1:])
    assert values["cells' git commit"] == "0123abc"
    assert values["config files given"] == "config/presets/optimizations.yaml"
    assert len(values["lock hash (requirements.txt, envs/*.yaml)"]) == 16


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
    # Speed-up heatmaps (PyTorch eager-bf16 and torchscript, TensorFlow eager-bf16 and
    # graph), latency against length, the fp32 and bf16 ratio heatmaps, memory and
    # throughput against input size.
    assert len(sizes) == 9
    assert all(width > 100 and height > 100 for width, height in sizes)


def test_every_image_says_what_it_shows(rendered):
    _, _, html = rendered
    texts = report_html.image_texts(html)
    assert len(texts) == 9 and all(t.startswith("Figure") for t in texts)
    latency = [t for t in texts if "y: median latency (ms)" in t]
    assert len(latency) == 1 and "x: sequence length (tokens)" in latency[0]
    assert "legend: framework, PyTorch, TensorFlow" in latency[0]
    assert sum("y: speed-up over eager (log scale)" in t for t in texts) == 4


def test_sections_follow_the_scenario_names():
    notebook = REPO / "workflow/notebooks/report.py"
    sections = notebook.parent / "sections"
    files = section_files(notebook, ["inference", "echo", "../report", "generic", "_tail"])
    assert files == [(sections / "inference.py", None), (sections / "generic.py", "echo"),
                     (sections / "generic.py", "../report"), (sections / "generic.py", "generic"),
                     (sections / "generic.py", "_tail"), (sections / "_efficiency.py", None),
                     (sections / "_tail.py", None)]


@pytest.mark.slow  # a report of its own each: about 10 s
@pytest.mark.parametrize("mix", [False, True])
def test_a_cell_from_elsewhere_is_named_and_left_out(tmp_path, mix):
    """TensorFlow graph at batch 1, length 8, copied in from a faster machine: the summary
    line and the status overview name it; the answer goes to PyTorch's torchscript, the next
    fastest, unless report.mix_foreign compares it."""
    summary = fixture_summary().assign(env_cpu_model="This CPU",
                                       started_at="2026-01-01T00:00:00")
    copied = summary["cell_id"].eq("tensorflow_bert_cpu_b1_s8_graph")
    summary.loc[copied, "env_cpu_model"] = "Fast CPU"
    path, html = tmp_path / "summary.parquet", tmp_path / "report.html"
    origin.mark(summary, mix).to_parquet(path, index=False)
    render(REPO / "workflow" / "notebooks" / "report.py", path, tmp_path / "r.ipynb", html)
    page = html.read_text()
    text = " ".join(BeautifulSoup(page, "html.parser").get_text().split())
    said = ("20 cells, 13 with timings; frameworks: PyTorch, TensorFlow. ⚠ 1 more from "
            "another machine or dlbench version, left out (see Status overview).",
            "⚠ 1 cell from elsewhere: measured on another machine")
    if mix:
        said = ("21 cells, 14 with timings; frameworks: PyTorch, TensorFlow. ⚠ 1 of them "
                "from another machine or dlbench version (see Status overview).",
                "⚠ 1 cell from elsewhere, compared with the rest (report.mix_foreign: true)")
    assert all(line in text for line in said), said
    header, *rows = next(rows for _, rows in report_html.tables(page)
                         if rows and rows[0] == ["cell_id", "status", "from", "compared"])
    assert [r[0] for r in rows] == ["tensorflow_bert_cpu_b1_s8_graph"]
    assert rows[0][2] == "another machine (Fast CPU; the run's: This CPU)"
    assert rows[0][3] == ("yes" if mix else "no")
    _, *answers = table_under(page, "The answer")
    assert answers[0][3] == ("TensorFlow graph" if mix else "PyTorch torchscript")
