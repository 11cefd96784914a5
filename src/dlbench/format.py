"""How values are written, alike in the analysis's tables and the report's pages: numbers,
seconds, errors, N/A reasons, framework names; and how text from the records (a reason, an
exception's message, a model's or a path's name) goes into the report's HTML, Markdown and
CSS as text, never as markup."""

import html
import math
import re

import numpy as np
import pandas as pd

from dlbench.catalogue import axes


def framework_name(framework: str) -> str:
    """'PyTorch' for 'pytorch'; an unknown framework keeps its own name."""
    return axes.FRAMEWORK_LABELS.get(framework, framework)


def framework_rank(framework: str) -> tuple[int, str]:
    """A sort key that puts frameworks (names or labels) in the registry's order, so every
    table and figure lists them alike; an unknown framework comes after, by name."""
    known = {name: i for i, name in enumerate(axes.FRAMEWORKS)}
    known |= {framework_name(name): i for name, i in known.items()}
    return known.get(framework, len(known)), framework


def fmt_ms(value: float | None) -> str:
    """3 significant digits, no scientific notation; '' for NaN."""
    if value is None or not np.isfinite(value):
        return ""
    decimals = max(0, 2 - math.floor(math.log10(abs(value)))) if value else 0
    return f"{value:,.{decimals}f}"


def fmt_s(value: float | None) -> str:
    """Seconds: two decimals, '<0.01' below; '' for NaN."""
    if value is None or pd.isna(value):
        return ""
    return "<0.01" if value < 0.005 else f"{value:,.2f}"


def fmt_error(value: float | None) -> str:
    """An error or a tolerance: '1.2e-03'; '' for NaN."""
    return "" if value is None or pd.isna(value) else f"{value:.1e}"


def fmt_percent(value: float | None) -> str:
    """A fraction as a percentage with one decimal: '12.3%'; '' for NaN."""
    return "" if pd.isna(value) else f"{value:.1%}"


def fmt_fixed(value: float | None, decimals: int = 2, missing: str = "") -> str:
    """A plain number with `decimals` decimals; `missing` for NaN."""
    return missing if pd.isna(value) else f"{value:.{decimals}f}"


def na(status: str | None, reason: str | None, width: int = 40) -> str:
    """'N/A (<short reason>)' for a cell that did not produce a timing."""
    text = "out of memory" if status == "oom" else (reason or status)
    text = " ".join(str(text).split())
    if len(text) > width:
        text = text[: width - 1].rstrip() + "…"
    return f"N/A ({text})"


def blank_repeats(frame: pd.DataFrame, column: str) -> pd.DataFrame:
    """Show a value only on its first row of a run, like a merged spreadsheet cell."""
    frame = frame.copy()
    values = frame[column].astype(object)
    frame[column] = values.where(values.ne(values.shift()), "")
    return frame


def file_link(path: str, label: str = "flame graph") -> str:
    """An HTML link from report/report.html to a file the run wrote (a relative path is
    the workflow's, beside report/); text that is not a file's path stays text. It is HTML,
    its parts escaped: give its column to `show` as `html`."""
    if not str(path).endswith((".svg", ".json", ".log")):
        return html_text(path)
    href = path if str(path).startswith("/") else f"../{path}"
    return f'<a href="{html_text(href)}">{html_text(label)}</a>'


# Text from the records is escaped where it meets a markup language, and only there: the
# analysis keeps plain strings, so that it compares and counts what the cells recorded.
# Tables: `dlbench.report.display.show` escapes every value, header, caption and tooltip.
# Markdown lines (`say`): each record's string goes through one of these three.

# What makes Markdown of text inside a line: a tag or an entity ('<', '&'), emphasis, code,
# a link's brackets, a table's bar, a heading's '#'; the rest of the punctuation is text.
_MARKDOWN_SYNTAX = re.compile(r"([\\`*_\[\]<>&!~|#])")


def md_text(value: object) -> str:
    """`value` as plain text inside a Markdown line: each character that Markdown reads as
    syntax (a '<' that opens a tag, '*', '[', '`' …) backslash-escaped; whitespace runs,
    line breaks too, as one space."""
    return _MARKDOWN_SYNTAX.sub(r"\\\1", " ".join(str(value).split()))


def md_code(value: object) -> str:
    """`value` as an inline code span: its fence longer than any run of backticks in it
    (a span's content is shown as it is, '<' and all)."""
    text = " ".join(str(value).split())
    fence = "`" * (max(map(len, re.findall("`+", text)), default=0) + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def md_code_block(value: object, info: str = "") -> str:
    """`value`, lines and all, as a fenced code block whose fence no line of it closes."""
    text = str(value).rstrip("\n")
    fence = "`" * max(3, max(map(len, re.findall("`+", text)), default=0) + 1)
    return f"{fence}{info}\n{text}\n{fence}"


def css_text(value: object) -> str:
    """`value` as the inside of a CSS string (a tooltip's `content: "…"` in a <style>):
    quotes, backslashes, line breaks and '<' as CSS escapes, so that it neither ends the
    string nor the <style> element."""
    return re.sub(r'[\\"<>&\n\r]', lambda m: f"\\{ord(m.group()):X} ", str(value))


def html_text(value: object) -> str:
    """`value` as HTML text (an attribute's value too)."""
    return html.escape(str(value), quote=True)


def count(n: int, noun: str) -> str:
    """'1 cell', '3 cells' (a plural in -s)."""
    return f"{n} {noun}{'' if n == 1 else 's'}"


def sentence(text: str) -> str:
    """`text` as a sentence's start: its first character in upper case, the rest as written
    (str.capitalize lowercases the rest: 'GFLOP/s' would read 'gflop/s', 'MHz' 'mhz')."""
    return text[:1].upper() + text[1:]
