"""The report executed on a synthetic summary with a third framework (`jax`): every section
runs, and the answer, the latency sheets, the ratio tables and the figures show all three.
The notebook runs in its own process, so JAX's label is whatever the registry gives it
(dlbench.catalogue.axes: 'jax' until JAX registers as 'JAX'). Then a real default run's
records (three frameworks in every scenario): each scenario's answer shows the three, fits a
laptop's window, and the figures' axes read in plain numbers."""

import json

import pandas as pd
import pytest
import yaml

from dlbench.format import framework_name
from dlbench.records import aggregate, provenance
from dlbench.report import render
from tests import report_html
from tests.conftest import REPO
from tests.test_report import CONFIG, fixture_summary, table_under, timed

JAX = framework_name("jax")


def jax_rows(template: pd.Series) -> pd.DataFrame:
    """JAX's cells: jit the fastest of all at batch 1, length 8 (3 ms) and a tie with
    TensorFlow's graph at batch 2 (8.1 ms against 8); op-by-op eager slower."""
    rows = [timed("jax", "jit", 3.0), timed("jax", "jit", 8.1, batch=2),
            timed("jax", "eager", 30.0), timed("jax", "jit", 40.0, seqlen=32)]
    shared = {column: template[column] for column in
              ("scenario", "env_git_commit", "env_fingerprint")}
    return pd.DataFrame([r | shared | {"env_packages_hash": "ja" * 8} for r in rows])


@pytest.fixture(scope="module")
def rendered(tmp_path_factory):
    folder = tmp_path_factory.mktemp("report3")
    summary = fixture_summary()
    summary = pd.concat([summary, jax_rows(summary.iloc[0])], ignore_index=True)
    path = folder / "summary.parquet"
    summary.to_parquet(path, index=False)
    provenance.write(folder / provenance.NAME, CONFIG, [])
    executed, html = folder / "logs" / "report.ipynb", folder / "report.html"
    render(REPO / "workflow" / "notebooks" / "report.py", path, executed, html)
    return json.loads(executed.read_text()), html.read_text()


def test_every_section_runs_with_three_frameworks(rendered):
    notebook, html = rendered
    outputs = [o for c in notebook["cells"] for o in c.get("outputs", [])]
    assert outputs and not [o for o in outputs if o["output_type"] == "error"]
    assert not [o for o in outputs if o.get("name") == "stderr"]
    headings = report_html.headings(html)
    # The latency sheets and the status counts list the frameworks in the registry's order.
    sheets = [headings.index(h) for h in ("PyTorch — eager", "TensorFlow — graph",
                                          f"{JAX} — jit")]
    assert sheets == sorted(sheets)
    counts = table_under(html, "Status overview")
    assert [r[0] for r in counts[1:]] == ["PyTorch", "TensorFlow", JAX, "total"]


def test_the_answer_and_the_ratios_show_every_framework(rendered):
    _, html = rendered
    header, *rows = table_under(html, "The answer")
    assert [h for h in header if h.endswith("'s best")] == [
        "PyTorch's best", "TensorFlow's best", f"{JAX}'s best"]
    assert rows[0][:4] == ["bert", "1", "8", f"{JAX} jit"]
    ratio = next(rows for h, rows in report_html.tables(html)
                 if h.startswith("fp32: float32 throughout"))
    assert ratio[0] == ["model, batch", "framework", "seqlen 8", "seqlen 32"]
    by_row = {(r[0], r[1]): r[2:] for r in ratio[1:]}
    # Batch 1: JAX's 3 ms is the fastest: TensorFlow's graph 4/3, PyTorch's torchscript 5/3.
    assert by_row["bert, batch 1", JAX] == ["fastest: jit", "2.05 (1.93–2.18) jit"]
    assert by_row["bert, batch 1", "TensorFlow"][0] == "1.33 (1.26–1.42) graph"
    assert by_row["bert, batch 1", "PyTorch"][0] == "1.67 (1.57–1.77) torchscript"
    # Batch 2: TensorFlow's graph 8 ms, JAX's jit 8.1 ms inside the noise.
    assert by_row["bert, batch 2", JAX][0] == "tie: 1.01 (0.95–1.08) jit"
    assert "tie: TensorFlow, " + JAX in html
    texts = report_html.image_texts(html)
    latency = next(t for t in texts if "y: median latency (ms)" in t)
    assert f"legend: framework, PyTorch, TensorFlow, {JAX}" in latency


@pytest.mark.slow  # a browser
def test_the_answer_fits_a_laptop_window_with_three_frameworks(tmp_path, rendered, chromium):
    """The answer's three '<framework>'s best' columns and every other table fit a 1300-px
    window: none runs off the page or needs a sideways scroll (tests/test_report_browser)."""
    assert tables_cut_off(rendered[1], tmp_path, chromium) == []


def tables_cut_off(html: str, folder, chromium) -> list[str]:
    """The tables of a report (its HTML) that do not fit a laptop's window in Chromium
    (tests/test_report_browser.cut_off), the page opened from a file in folder."""
    from tests.conftest import headless_chrome
    from tests.test_report_browser import cut_off

    page = folder / "report.html"
    page.write_text(html)
    with headless_chrome(chromium) as driver:
        driver.get(page.as_uri())
        return cut_off(driver)


def test_the_gpu_and_mixed_precision_sections_describe_every_framework(rendered):
    """Their prose comes from the registry: one item per framework, in its order, in both
    sections (they named PyTorch and TensorFlow only)."""
    from bs4 import BeautifulSoup

    from dlbench.catalogue import frameworks

    items = [li.get_text(" ", strip=True) for li in BeautifulSoup(rendered[1], "html.parser")(
        "li")]
    for attribute, lead in (("gpu_timing", "timed "), ("mixed_precision", "")):
        found = [(f.label, i) for f in frameworks.declarations() for i, text in enumerate(items)
                 if text.startswith(f"{f.label} : {lead}{getattr(f, attribute)[:30]}")]
        assert [label for label, _ in found] == ["PyTorch", "TensorFlow", JAX, "ONNX Runtime"], \
            attribute
        assert [i for _, i in found] == sorted(i for _, i in found)


# -- a real default run ------------------------------------------------------------------------

# The records of a default run (config/config.yaml, commit d299870, a 2-core Intel Xeon):
# runs/ is its results/runs/*.json, peak/ its results/peak/*.json (not libraries/). To renew
# them, replace both folders' files with a newer default run's, from a results/ folder that
# held that run only, and say its commit here. The report's provenance is this checkout's.
DEFAULT_RUN = REPO / "tests" / "data" / "default_run"
ANSWERS = {"Inference": "bert-base-uncased", "Training": "cnn", "Generation": "distilgpt2"}


@pytest.fixture(scope="module")
def default_report(tmp_path_factory) -> str:
    """The default run's report, rendered from its records as the workflow does."""
    folder = tmp_path_factory.mktemp("default-run")
    summary = aggregate.summarize(sorted((DEFAULT_RUN / "runs").glob("*.json")))
    path = folder / "summary.parquet"
    summary.to_parquet(path, index=False)
    config = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
    provenance.write(folder / provenance.NAME, config, ["config/config.yaml"])
    html = folder / "report.html"
    render(REPO / "workflow" / "notebooks" / "report.py", path, folder / "report.ipynb", html,
           sorted((DEFAULT_RUN / "peak").glob("*.json")))
    return html.read_text()


@pytest.mark.slow  # a report of every scenario
def test_each_scenarios_answer_shows_the_three_frameworks(default_report):
    answers = [rows for heading, rows in report_html.tables(default_report)
               if heading == "The answer"]
    assert len(answers) == len(ANSWERS)
    for (scenario, model), (header, *rows) in zip(ANSWERS.items(), answers, strict=True):
        assert [h for h in header if h.endswith("'s best")] == [
            "PyTorch's best", "TensorFlow's best", f"{JAX}'s best"], scenario
        assert rows and all(row[0] == model for row in rows), scenario
        best = [header.index(f"{name}'s best") for name in ("PyTorch", "TensorFlow", JAX)]
        assert all(row[i] and not row[i].startswith("—") for row in rows for i in best), \
            (scenario, rows)


@pytest.mark.slow  # a report of every scenario
def test_every_figure_reads_its_axes_in_plain_numbers(default_report):
    """matplotlib's log axes label their ticks in mathtext, which the report shows as text
    (`$\\mathdefault{2^{0}}$`): every axis's ticks must be plain numbers. The figure's
    words (its alt) carry the tick labels as drawn."""
    texts = report_html.image_texts(default_report)
    assert not [t for t in texts if "$" in t or "mathdefault" in t]
    tokens = [t for t in texts if "y: generated tokens/s" in t]
    assert len(tokens) == 1 and "x: batch size [1]" in tokens[0], texts


@pytest.mark.slow  # a report of every scenario
def test_the_answer_says_how_many_rounds_its_ratios_need(default_report):
    """That run's processes spread by 6.4% (inference and generation pooled): with its 2
    rounds a ratio spans about ±14%, and the answer says 4 rounds would bring it within
    ±10%, once under each of those two answers; training's own spread needs no advice."""
    import re

    text = re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", default_report))
    notes = re.findall(r"Between fresh processes this run's times spread by ([\d.]+)%.*?"
                       r"about ±(\d+)%; ±10% would take ([^ ]+: \d+) ?\.", text)
    assert notes == [("6.4", "14", "measurement.rounds: 4")] * 2, notes


@pytest.mark.slow  # a report of every scenario
def test_a_default_run_publishes_no_growth_per_token_from_two_sizes(default_report):
    """Per_group in two rounds, each recipe has two sizes measured first in a fresh
    process: the report says why it gives no growth per 1,000 tokens instead of a slope
    through two points (JAX's came out negative), and no interval of a cell's median in the
    quality table spans a factor of 2 (the drift between rounds pooled over the scenarios;
    with each scenario's own, one degree of freedom, that run's reached 2.26)."""
    import re

    text = re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", default_report))
    assert "Memory per 1,000 tokens is not estimated: each recipe has at most 2 input sizes" \
        in text
    assert "MiB per 1k tokens" not in text
    quality = [rows for heading, rows in report_html.tables(default_report)
               if "95% CI of the median" in rows[0]]
    assert quality, "no quality table"
    header, *rows = quality[0]
    column = header.index("95% CI of the median")
    for row in rows:
        low, high = (float(v.replace(",", "")) for v in row[column].split(" – "))
        assert high / low < 2.0, row  # ±41%: that run's own drift gave 2.26 (±50%)


@pytest.mark.slow  # a browser
def test_a_default_runs_report_fits_a_laptop_window(tmp_path, default_report, chromium):
    """With three frameworks, each scenario's answer (training's and generation's too) and
    every other table fit a 1300-px window."""
    assert tables_cut_off(default_report, tmp_path, chromium) == []
