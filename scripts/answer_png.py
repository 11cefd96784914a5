"""A picture of a report's first table, "The answer", for the README (docs/answer.png).

Opens a report.html in headless Chromium (Debian's /usr/bin/chromium, driven by Selenium
through /usr/bin/chromedriver, with a fresh profile and no network traffic of its own) and
screenshots the first table after the "The answer" heading, then keeps the PNG small
(a palette of 64 colours).

    .venv/bin/python scripts/answer_png.py report/report.html [--out docs/answer.png]
"""

import argparse
import io
import shutil
import tempfile
from pathlib import Path

from PIL import Image
from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By

FLAGS = ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--no-first-run", "--disable-component-update", "--disable-sync",
         "--window-size=1300,1000", "--hide-scrollbars", "--force-device-scale-factor=2")
ANSWER_TABLE = "//h2[@id='The-answer']/following::table[1]"


def screenshot(report: Path, browser: str = "/usr/bin/chromium",
               driver_path: str = "/usr/bin/chromedriver") -> bytes:
    """The PNG of the report's first answer table, as Chromium draws it."""
    profile = tempfile.mkdtemp(prefix="dlbench-chromium-")
    options = webdriver.ChromeOptions()
    options.binary_location = browser
    for flag in (*FLAGS, f"--user-data-dir={profile}"):
        options.add_argument(flag)
    driver = webdriver.Chrome(options=options, service=Service(driver_path))
    try:
        driver.get(report.resolve().as_uri())
        table = driver.find_element(By.XPATH, ANSWER_TABLE)
        driver.execute_script("arguments[0].scrollIntoView(true);", table)
        return table.screenshot_as_png
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


def small(png: bytes, colours: int = 64) -> bytes:
    """The same picture with a palette: a table's few colours, a fraction of the bytes."""
    image = Image.open(io.BytesIO(png)).convert("RGB")
    out = io.BytesIO()
    image.quantize(colors=colours).save(out, format="PNG", optimize=True)
    return out.getvalue()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("report", type=Path, help="a report.html")
    parser.add_argument("--out", type=Path, default=Path("docs/answer.png"))
    args = parser.parse_args()
    png = small(screenshot(args.report))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_bytes(png)
    width, height = Image.open(io.BytesIO(png)).size
    print(f"{args.out}: {width} × {height} pixels, {len(png) / 1024:.0f} KiB")


if __name__ == "__main__":
    main()
