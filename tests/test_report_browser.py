"""The fixture's report in headless Chromium: no console errors, every image decoded, the
contents' links land on their sections, it prints to PDF; screenshots are saved (to the
test's folder, and to $DLBENCH_SCREENSHOTS if set) for a person to look at."""

import base64
import os
import shutil

import pytest

from tests.conftest import headless_chrome
from tests.test_report import render_fixture

pytestmark = pytest.mark.slow  # a browser: `pytest -m "not slow"` skips it

# Sections to photograph: the top of the page, then these headings' ids.
SHOTS = ["The-answer", "Memory-against-input-size",
         "Throughput-against-batch-size-and-sequence-length", "Reproduce"]


def test_report_in_a_browser(tmp_path, chromium):
    _, _, html = render_fixture(tmp_path)
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
    assert hidden == []  # printed, every section the contents link to is shown
    assert len(images) == 9 and all(done and width > 0 and alt.startswith("Figure")
                                    for done, width, alt in images)
    assert len(targets) > 10 and all(targets)
    assert pdf.startswith(b"%PDF") and pdf.count(b"/Type /Page") > 3
    (shots / "report.pdf").write_bytes(pdf)
    assert all(p.stat().st_size > 10_000 for p in shots.glob("*.png"))
    if os.environ.get("DLBENCH_SCREENSHOTS"):
        shutil.copytree(shots, os.environ["DLBENCH_SCREENSHOTS"], dirs_exist_ok=True)
