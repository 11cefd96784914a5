"""End to end: the real `snakemake` on the tiny matrix, then the summary and the HTML
report checked as files and in a real browser (headless Chromium)."""

import json
import re

import pandas as pd
import pytest
import yaml
from bs4 import BeautifulSoup

from dlbench.files import paths
from dlbench.format import fmt_ms, framework_name, na
from dlbench.plan import config
from dlbench.plan.matrix import expand_cells
from dlbench.records import result
from tests import report_html
from tests.conftest import REPO, TINY_RUN, headless_chrome, snakemake, tiny_config

pytestmark = pytest.mark.slow  # end-to-end: `pytest -m "not slow"` skips it

PROFILE = ["--workflow-profile", str(REPO / "workflow" / "profiles" / "default")]


@pytest.fixture(scope="module")
def workflow_run(tiny_workflow):
    return tiny_workflow


@pytest.fixture(scope="module")
def cells():
    return expand_cells(config.validate(TINY_RUN))


def test_every_cell_writes_a_valid_json(workflow_run, cells):
    runs = workflow_run / "results" / "runs"
    assert sorted(p.stem for p in runs.glob("*.json")) == sorted(c.id for c in cells)
    for cell in cells:
        record = result.read(runs / f"{cell.id}.json")
        expected_reason = cell.unsupported_reason()
        if expected_reason:
            assert (record["status"], record["reason"]) == ("unsupported", expected_reason)
        elif cell.device == "gpu":
            assert record["status"] == "unsupported" and "GPU" in record["reason"]
        else:
            assert record["status"] == "ok", (cell.id, record["reason"])
            assert record["timing"]["iterations"] >= 3


def test_summary_has_one_row_per_cell(workflow_run, cells):
    summary = pd.read_parquet(workflow_run / "results" / "summary.parquet")
    csv = pd.read_csv(workflow_run / "results" / "summary.csv")
    assert sorted(summary["cell_id"]) == sorted(c.id for c in cells)
    assert len(csv) == len(summary)
    ok = summary[summary["status"] == "ok"]
    assert set(ok["framework"]) == set(TINY_RUN["frameworks"])
    assert (ok["median_ms"] > 0).all()
    assert summary.loc[summary["status"] != "ok", "reason"].str.len().gt(0).all()


def test_report_shows_every_cells_median(workflow_run):
    """The latency sheets hold each timed cell's median as the report formats it, and each
    other cell's N/A with its reason."""
    html = (workflow_run / "report" / "report.html").read_text()
    summary = pd.read_parquet(workflow_run / "results" / "summary.parquet")
    several = summary["device"].nunique() > 1
    sheets = {heading: report_html.sheet(rows) for heading, rows in report_html.tables(html)
              if heading and " — " in heading}
    timed = 0
    for cell in summary.itertuples():
        heading = f"{framework_name(cell.framework)} — {cell.optimization}"
        heading += f" ({cell.device})" if several else ""
        if cell.status == "ok":
            text = sheets[heading][cell.model, str(cell.batch), f"seqlen {cell.seqlen}"]
            assert text.split()[0] == fmt_ms(cell.median_ms), (cell.cell_id, text)
            timed += 1
        elif "does not exist in" in cell.reason:  # not applicable by design: no sheet
            assert heading not in sheets
        elif heading in sheets:
            text = sheets[heading][cell.model, str(cell.batch), f"seqlen {cell.seqlen}"]
            assert text == na(cell.status, cell.reason), (cell.cell_id, text)
        else:  # every cell of the sheet N/A for one reason: one line instead
            assert f"cells N/A — {cell.status}: {cell.reason}" in html
    assert timed == summary["status"].eq("ok").sum() > 0
    assert "exceeds tiny-bert's maximum of 64 positions" in html
    counts = next(rows for _, rows in report_html.tables(html)
                  if rows[0][:2] == ["framework", "ok"])
    assert counts[-1][0] == "total" and counts[-1][-1] == str(len(summary))
    assert "not applicable" in counts[0]  # PyTorch graph: counted, never listed as failed
    provenance = json.loads((workflow_run / "results" / "provenance.json").read_text())
    assert provenance["config"]["inference"] == TINY_RUN["inference"]
    assert "snakemake --cores all --configfile config.yaml" in BeautifulSoup(
        html, "html.parser").get_text()
    assert "import pandas" not in html and "dlbench.analysis" not in html  # no code cells


def test_report_images_decode(workflow_run):
    html = (workflow_run / "report" / "report.html").read_text()
    sizes = report_html.images(html)  # every image embedded as a PNG, none linked
    # TensorFlow graph's speed-up, latency against length, the ratio against the fastest.
    assert len(sizes) >= 3
    assert all(width > 100 and height > 100 for width, height in sizes)


def test_the_report_of_a_real_run_prints_no_warning(workflow_run):
    """The executed notebook of a real summary (hundreds of columns) wrote nothing to
    stderr: a library's warning printed into the report (pandas' PerformanceWarning of a
    fragmented frame, five times in the default run's) is noise in front of the reader."""
    notebook = json.loads((workflow_run / paths.REPORT_NOTEBOOK).read_text())
    printed = [o.get("text") for c in notebook["cells"] for o in c.get("outputs", [])
               if o.get("name") == "stderr"]
    assert not printed, printed


def test_report_renders_in_a_browser(workflow_run, chromium):
    with headless_chrome(chromium) as driver:
        driver.get((workflow_run / "report" / "report.html").as_uri())
        images = driver.execute_script(
            "return [...document.images].map(i => [i.complete, i.naturalWidth])")
        tables = driver.execute_script(
            "return [...document.querySelectorAll('table')].map(t => t.rows.length)")
        text = driver.execute_script("return document.body.innerText")
    assert len(images) >= 2 and all(done and width > 100 for done, width in images)
    assert len(tables) >= 4 and all(rows >= 2 for rows in tables)
    assert "PyTorch" in text and "TensorFlow" in text


def test_the_peak_is_measured_once_and_reused_by_the_next_report(workflow_run):
    """One GEMM peak per device and precision of the matrix; a report rendered again reads
    the same files (not measured again: unchanged mtimes) and shows the efficiency.

    The peak's two threads share the 2 cores with the suite's other worker: when that
    worker kept a core busy through every attempt, the peak is rightly `busy` (no ceiling,
    tests/test_peak.py plants both outcomes), and the report must say so instead of
    showing shares of a low figure (CI, 2026-11-30: busy beside a training test)."""
    folder = workflow_run / "results" / "peak"
    peaks = {path.name: path for path in folder.glob("*.json")}
    assert sorted(peaks) == ["cpu_fp32_t2.json", "gpu_fp32_t2.json"]
    cpu = json.loads(peaks["cpu_fp32_t2.json"].read_text())
    if cpu["status"] == "ok":
        assert cpu["gflops"] > 0
    else:  # every library's every attempt got fewer than 90 % of its 2 cores
        assert cpu["status"] == "busy", cpu["reason"]
        attempts = [a for lib in cpu["libraries"].values() for a in lib.get("attempts", [])]
        assert attempts and all(a["busy"] and a["cores_used"] < 1.8 for a in attempts)
    gpu = json.loads(peaks["gpu_fp32_t2.json"].read_text())
    assert gpu["status"] == "ok" or "CUDA" in gpu["reason"]
    before = {name: path.stat().st_mtime_ns for name, path in peaks.items()}
    report = workflow_run / "report" / "report.html"
    rendered = report.stat().st_mtime_ns
    run = snakemake(workflow_run, TINY_RUN, *PROFILE, "--cores", "2", "--forcerun", "report")
    assert run.returncode == 0, run.stderr[-3000:]
    assert report.stat().st_mtime_ns > rendered
    assert {name: path.stat().st_mtime_ns for name, path in peaks.items()} == before
    html = report.read_text()
    assert "Efficiency against the machine's limit" in report_html.headings(html)
    rows = [row for heading, rows in report_html.tables(html)
            if heading == "Efficiency against the machine's limit" for row in rows]
    shares = [text for row in rows for text in row if text.endswith("%")]
    if cpu["status"] == "ok":
        assert shares
    else:
        assert not shares and "Measured on a busy machine" in html


def test_second_run_has_nothing_to_do(workflow_run):
    run = snakemake(workflow_run, TINY_RUN, *PROFILE, "--cores", "2", "--dry-run")
    assert run.returncode == 0
    assert "Nothing to be done" in run.stdout + run.stderr


def test_snakemakes_provenance_report_holds_summary_report_and_logs(workflow_run, cells):
    """`snakemake --report`: the summary, dlbench's report and every measuring job's log are
    in Snakemake's own provenance view, as the files themselves."""
    import base64
    import re

    run = snakemake(workflow_run, TINY_RUN, "--report", "report/provenance.html")
    assert run.returncode == 0, run.stderr[-3000:]
    html = (workflow_run / "report" / "provenance.html").read_text()
    embedded = {}  # path → content, from the report's data: entries
    for key in re.finditer(r'"([\w./-]+)": \{"name": ', html):
        uri = re.compile(r'"data_uri": "data:[^"]*;base64,([^"]*)"').search(html, key.end())
        embedded[key.group(1)] = base64.b64decode(uri.group(1))
    logs = {cell.log_path("per_cell") for cell in cells}
    assert logs <= set(embedded), sorted(logs - set(embedded))[:3]
    for path in ["results/summary.csv", "report/report.html", *sorted(logs)[:3]]:
        assert embedded[path] == (workflow_run / path).read_bytes(), path


def test_the_slurm_profile_sizes_every_measuring_rule(tmp_path):
    """Every rule that measures (its rounds before the last included) asks SLURM for its
    own time and memory: with the defaults (30 min, 2000 MB) a side-by-side job, seven
    models resident, would be killed. A matrix that plans every kind: two scenarios that
    group their sizes (each its own rules), side by side on the CPU and in groups on a
    GPU, in rounds; and the one-cell rules, which run.smk names."""
    matrix = tiny_config(
        frameworks=["pytorch", "jax"], models=["tiny-bert"], batch_sizes=[1],
        optimizations=["eager"], devices=["cpu", "gpu"],
        measurement={"process": "side_by_side", "rounds": 2},
        generation={"models": ["tiny-gpt2"], "batch_sizes": [1], "prompt_lengths": [8],
                    "new_tokens": [4], "optimizations": ["eager"]})
    dry = snakemake(tmp_path, matrix, "--cores", "2", "--dry-run")
    assert dry.returncode == 0, dry.stderr[-3000:]
    planned = set(re.findall(r"^(?:local)?rule (measure_\w+):", dry.stdout, re.M))
    assert planned == {f"{kind}{scenario}{round_}"
                       for kind in ("measure_group", "measure_side_by_side")
                       for scenario in ("", "_generation") for round_ in ("", "_round")}
    single = set(re.findall(r"^\s*rule (measure_\w+):",
                            (REPO / "workflow" / "rules" / "run.smk").read_text(), re.M))
    assert single == {"measure_cell", "measure_cell_round"}, single
    profile = yaml.safe_load((REPO / "workflow" / "profiles" / "slurm" / "config.yaml")
                             .read_text())
    assert planned | single <= set(profile["set-resources"]), \
        sorted(planned | single - set(profile["set-resources"]))
