"""How the report writes values: numbers, seconds, errors, N/A reasons, framework names."""

import math

import numpy as np
import pandas as pd

from dlbench import axes


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
    the workflow's, beside report/); text that is not a file's path stays as it is."""
    if not str(path).endswith((".svg", ".json", ".log")):
        return str(path)
    href = path if str(path).startswith("/") else f"../{path}"
    return f'<a href="{href}">{label}</a>'


def count(n: int, noun: str) -> str:
    """'1 cell', '3 cells' (a plural in -s)."""
    return f"{n} {noun}{'' if n == 1 else 's'}"
