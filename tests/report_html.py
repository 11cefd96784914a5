"""Reading a rendered report back: its tables under their headings, its images decoded."""

import base64
import io

from bs4 import BeautifulSoup
from PIL import Image


def headings(html: str) -> list[str]:
    """The text of every h1, h2 and h3, in order (without nbconvert's anchor mark)."""
    soup = BeautifulSoup(html, "html.parser")
    return [_text(tag) for tag in soup.find_all(["h1", "h2", "h3"])]


def tables(html: str) -> list[tuple[str | None, list[list[str]]]]:
    """(the heading above it, its rows of cell texts) for every table, in order."""
    soup = BeautifulSoup(html, "html.parser")
    found, heading = [], None
    for tag in soup.find_all(["h1", "h2", "h3", "table"]):
        if tag.name != "table":
            heading = _text(tag)
            continue
        rows = [[_text(c) for c in tr.find_all(["th", "td"])] for tr in tag.find_all("tr")]
        found.append((heading, rows))
    return found


def sheet(rows: list[list[str]]) -> dict[tuple[str, str, str], str]:
    """A latency sheet as {(model, batch, 'seqlen n'): text}; the model, shown on its first
    row only, applies to the rows below it."""
    header, model, cells = rows[0], None, {}
    for row in rows[1:]:
        model = row[0] or model
        for column, text in zip(header[2:], row[2:], strict=True):
            cells[model, row[1], column] = text
    return cells


def images(html: str) -> list[tuple[int, int]]:
    """The decoded (width, height) of every image; each must be an embedded PNG."""
    soup = BeautifulSoup(html, "html.parser")
    sizes = []
    for img in soup.find_all("img"):
        prefix = "data:image/png;base64,"
        assert img["src"].startswith(prefix), img["src"][:80]
        with Image.open(io.BytesIO(base64.b64decode(img["src"][len(prefix):]))) as image:
            image.load()
            sizes.append(image.size)
    return sizes


def image_texts(html: str) -> list[str]:
    """The text alternative (alt) of every image, in order."""
    return [img.get("alt", "") for img in BeautifulSoup(html, "html.parser").find_all("img")]


def _text(tag) -> str:
    return " ".join(tag.get_text(" ", strip=True).replace("¶", "").split())
