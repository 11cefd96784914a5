"""The fixture's report in headless Chromium: no console errors, every image decoded, the
contents' links land on their sections, every table fits a 1300-px window, markup planted
in the records is shown as text and never runs, it prints to PDF; screenshots are saved
(to the test's folder, and to $DLBENCH_SCREENSHOTS if set) for a person to look at."""

import base64
import json
import os
import shutil

import pandas as pd
import pytest
from bs4 import BeautifulSoup

from dlbench.records import provenance
from dlbench.report import render
from tests.conftest import REPO, headless_chrome
from tests.test_report import CONFIG, fixture_summary

pytestmark = pytest.mark.slow  # a browser: `pytest -m "not slow"` skips it

# Sections to photograph: the top of the page, then these headings' ids.
SHOTS = ["The-answer", "Memory-against-input-size",
         "Throughput-against-batch-size-and-sequence-length", "Reproduce"]
# A window as wide as a laptop's browser: no table may run off its right edge.
WINDOW = 1300
# Each table's right edge, that of the output area it sits in (which scrolls sideways when
# a table is wider) and its caption.
TABLE_EDGES = """return [...document.querySelectorAll('table')].map(t => [
  t.getBoundingClientRect().right, t.closest('.jp-OutputArea-output, body')
  .getBoundingClientRect().right, t.caption ? t.caption.innerText : ''])"""


def cut_off(driver) -> list[str]:
    """The tables wider than the page at a WINDOW-px window: they run off its right edge or
    need a sideways scroll to be read."""
    driver.set_window_size(WINDOW, 1000)
    width = driver.execute_script("return window.innerWidth")
    return [f"{caption or 'a table'}: right edge {right:.0f} px (room for {min(room, width):.0f})"
            for right, room, caption in driver.execute_script(TABLE_EDGES)
            if right > min(room, width) + 0.5]


def test_report_in_a_browser(tmp_path, chromium, fixture_report):
    _, _, html = fixture_report  # rendered once for this and tests/test_report.py
    shots = tmp_path / "screenshots"
    shots.mkdir()
    with headless_chrome(chromium) as driver:
        driver.get(html.as_uri())
        errors = [e for e in driver.get_log("browser") if e["level"] == "SEVERE"]
        images = driver.execute_script(
            "return [...document.images].map(i => [i.complete, i.naturalWidth, i.alt])")
        targets = driver.execute_script(
            "return [...document.querySelectorAll('nav#contents a')]"
            ".map(a => document.getElementById(a.getAttribute('href').slice(1)) !== null)")
        wide = cut_off(driver)
        driver.save_screenshot(str(shots / "0-top.png"))
        for number, section in enumerate(SHOTS, 1):
            driver.execute_script(f"document.getElementById('{section}').scrollIntoView()")
            driver.save_screenshot(str(shots / f"{number}-{section}.png"))
        pdf = base64.b64decode(driver.print_page())
        # The page as printed: the print stylesheet applied, at an A4 page's width.
        driver.execute_cdp_cmd("Emulation.setEmulatedMedia", {"media": "print"})
        driver.set_window_size(800, 1100)
        for number, section in enumerate(SHOTS[:2], 1):
            driver.execute_script(f"document.getElementById('{section}').scrollIntoView()")
            driver.save_screenshot(str(shots / f"print-{number}-{section}.png"))
        hidden = driver.execute_script(
            "return [...document.querySelectorAll('nav#contents a')]"
            ".map(a => document.getElementById(a.getAttribute('href').slice(1)))"
            ".filter(h => h.offsetHeight === 0).map(h => h.id)")
    assert errors == []
    assert wide == []
    assert hidden == []  # printed, every section the contents link to is shown
    assert len(images) == 9 and all(done and width > 0 and alt.startswith("Figure")
                                    for done, width, alt in images)
    assert len(targets) > 10 and all(targets)
    assert pdf.startswith(b"%PDF") and pdf.count(b"/Type /Page") > 3
    (shots / "report.pdf").write_bytes(pdf)
    assert all(p.stat().st_size > 10_000 for p in shots.glob("*.png"))
    if os.environ.get("DLBENCH_SCREENSHOTS"):
        shutil.copytree(shots, os.environ["DLBENCH_SCREENSHOTS"], dirs_exist_ok=True)


def test_wide_tables_fit_the_page(tmp_path, chromium):
    """A flagged-cells table as a real run writes it — every quality column, cell ids of 60
    characters without a space, flags of two sentences — wraps to the page's width (it ran
    1,442 px wide, off a 1,300-px window, before cells broke after underscores)."""
    summary = fixture_summary()
    timed = summary["scenario"].eq("inference")
    summary.loc[timed, "cell_id"] = ("training_" + summary.loc[timed, "cell_id"].str.replace(
        "bert", "bert-base-uncased") + "_synthetic_w2-p2-cache-pin_sgd")
    summary = summary.assign(
        median_ci95_half_width=0.031, median_ci95_coverage=0.961, stopped_by="max_duration",
        attempts=2, utilization_process_cpu_cores_mean=1.71, utilization_other_load_cores=0.71,
        utilization_steal_fraction=0.002, between_processes_cv=0.034)
    summary.loc[timed, "flags_unstable"] = True
    summary.loc[timed, "flags_reasons"] = (
        "busy machine: other processes kept 0.71 of the cell's cores busy during its timed "
        "loop (limit 0.25); interval not reached: the 95% interval of the median is ±3.1% "
        "after max_duration_s (target ±2.0%)")
    path, html = tmp_path / "summary.parquet", tmp_path / "report.html"
    summary.to_parquet(path, index=False)
    provenance.write(tmp_path / provenance.NAME, CONFIG, ["config/presets/optimizations.yaml"])
    render(REPO / "workflow" / "notebooks" / "report.py", path, tmp_path / "report.ipynb", html)
    with headless_chrome(chromium) as driver:
        driver.get(html.as_uri())
        wide = cut_off(driver)
        driver.execute_script("document.getElementById('Measurement-quality').scrollIntoView()")
        driver.save_screenshot(str(tmp_path / "flagged-cells.png"))
        flagged = [right for right, _, caption in driver.execute_script(TABLE_EDGES)
                   if caption == "Flagged cells"]
    assert len(flagged) == 1 and wide == []
    # Iterations are whole numbers, stored as floats beside the echo cells' gaps.
    assert ".000000" not in html.read_text()
    if os.environ.get("DLBENCH_SCREENSHOTS"):
        shutil.copy(tmp_path / "flagged-cells.png", os.environ["DLBENCH_SCREENSHOTS"])


# Text a record can carry that a browser would run if it were markup: each sets
# window.__pwned if it runs; a tooltip's </style> would end the tables' stylesheet.
SCRIPT = "<script>window.__pwned = 'script'</script>"
IMAGE = '"><img src=x onerror="window.__pwned = \'image\'">'
# '$\\frac$' is mathtext that matplotlib cannot parse: the figures must show it as text.
HOSTILE_MODEL = "bert$\\frac$<img src=x onerror=window.__pwned=1>"


def hostile_summary() -> pd.DataFrame:
    """The fixture's cells with markup in an exception's message, a reason, a flag's
    reason (a tooltip), a model's name and the config (Reproduce's code block)."""
    summary = fixture_summary()
    failed = summary["status"].eq("error") & summary["scenario"].eq("inference")
    # A second failed compile cell: the sheet of all-failed cells says its reason in a line.
    again = summary[failed].assign(batch=2, cell_id=lambda f: f["cell_id"].str.replace(
        "_b1_", "_b2_"))
    summary = pd.concat([summary, again], ignore_index=True)
    failed = summary["status"].eq("error") & summary["scenario"].eq("inference")
    summary.loc[failed, "reason"] = f"RuntimeError: {SCRIPT}{IMAGE}"
    timed = summary["status"].eq("ok") & summary["scenario"].eq("inference")
    summary.loc[timed, "attention_implementation"] = "sdpa"  # said in a line of Markdown
    summary.loc[timed & summary["framework"].eq("tensorflow"),
                "attention_implementation"] = f"eager {SCRIPT} {IMAGE}"
    summary.loc[summary["status"].eq("oom"), "reason"] = f"out of memory {IMAGE}"
    flagged = summary["flags_reasons"].notna()
    summary.loc[flagged, "flags_reasons"] = f'unstable</style>{SCRIPT}"; {IMAGE}'
    seqlen32 = summary["seqlen"].eq(32)
    summary.loc[seqlen32, "model"] = HOSTILE_MODEL
    summary.loc[seqlen32, "cell_id"] = summary.loc[seqlen32, "cell_id"].str.replace(
        "bert", HOSTILE_MODEL)
    summary.loc[summary["scenario"].eq("echo") & summary["status"].eq("error"),
                "reason"] = f"EchoError: {SCRIPT}"
    return summary


def test_hostile_text_in_the_records_is_shown_as_text(tmp_path, chromium):
    """Markup in what the cells recorded, and in the summary's path, is text on the page:
    nothing it would add exists, nothing of it ran, and each planted string reads as it is."""
    # The summary's path, shown in a code span: a '`' in it must not end the span early.
    folder = tmp_path / ("`" + IMAGE.replace("/", ""))
    folder.mkdir()
    path, html = folder / "summary.parquet", tmp_path / "report.html"
    hostile_summary().to_parquet(path, index=False)
    config = json.loads(json.dumps(CONFIG))
    config["inference"]["models"].append(HOSTILE_MODEL)  # in Reproduce's config.yaml
    provenance.write(folder / provenance.NAME, config, [])
    render(REPO / "workflow" / "notebooks" / "report.py", path, tmp_path / "report.ipynb", html)
    with headless_chrome(chromium) as driver:
        driver.get(html.as_uri())
        ran = driver.execute_script("return window.__pwned === undefined ? null : window.__pwned")
        planted = driver.execute_script(
            "return [...document.querySelectorAll('img[onerror], script')]"
            ".filter(e => e.tagName == 'IMG' || e.text.includes('__pwned'))"
            ".map(e => e.outerHTML)")
        text = driver.execute_script("return document.body.innerText")
        styles = driver.execute_script("return document.styleSheets.length")
    assert ran is None
    assert planted == []
    for shown in (f"All 2 cells N/A — error: RuntimeError: {SCRIPT}{IMAGE}",
                  f"TensorFlow ran transformers' eager {SCRIPT} {IMAGE} implementation",
                  f"EchoError: {SCRIPT}", HOSTILE_MODEL, f"Summary: {path}",
                  f"models: [bert, {HOSTILE_MODEL}]"):
        assert shown in text, shown
    # A tooltip's '</style>' ended no stylesheet early: the browser has every <style>, and
    # none holds a '<' (the tooltips' are CSS escapes).
    page = BeautifulSoup(html.read_text(), "html.parser")
    assert styles == len(page.find_all("style"))
    assert [s for s in page.find_all("style") if "<" in s.get_text()] == []
