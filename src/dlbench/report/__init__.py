"""Render the report: the head notebook, one section per scenario of the summary and the
tail, composed into one notebook, executed by papermill on the summary, as HTML without
code cells, finished as a page of its own (dlbench.report.page: offline, a table of
contents, a print stylesheet).

The notebooks are jupytext percent scripts: `<head>` (e.g. workflow/notebooks/report.py),
and beside it `sections/<scenario>.py` for a scenario with a section of its own,
`sections/generic.py` for any other (its `scenario` set to the scenario's name) and
`sections/_tail.py` for what applies to every scenario. Each section's own cell tagged
"parameters" (its defaults, so that it runs alone) gives way to the head's parameters.
"""

import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from dlbench.report.page import finish
from dlbench.result import write_text_atomic

if TYPE_CHECKING:
    from nbformat import NotebookNode

# The notebooks import dlbench: the kernel must find this one, whoever calls render().
SRC = Path(__file__).resolve().parents[2]
SECTIONS = "sections"
GENERIC = "generic"
TAIL = "_tail"
# A scenario's name finds its section file: only plain names, never generic's or the tail's.
_SECTION_NAME = re.compile(r"[a-z0-9][a-z0-9_-]*")


def section_files(notebook: Path, scenarios: list[str]) -> list[tuple[Path, str | None]]:
    """(section file, scenario to set or None) for each scenario, then the tail."""
    folder = Path(notebook).parent / SECTIONS
    files = []
    for scenario in scenarios:
        own = folder / f"{scenario}.py"
        if _SECTION_NAME.fullmatch(scenario) and scenario != GENERIC and own.is_file():
            files.append((own, None))
        else:
            files.append((folder / f"{GENERIC}.py", scenario))
    return files + [(folder / f"{TAIL}.py", None)]


def compose(notebook: Path, scenarios: list[str]) -> "NotebookNode":
    """The head notebook with the sections of these scenarios and the tail appended."""
    import jupytext
    from nbformat.v4 import new_code_cell

    head = jupytext.read(notebook)
    for path, scenario in section_files(notebook, scenarios):
        for cell in jupytext.read(path, fmt="py:percent").cells:
            if "parameters" in cell.metadata.get("tags", []):
                if scenario is None:
                    continue
                cell = new_code_cell(f"scenario = {scenario!r}")
            head.cells.append(cell)
    return head


@contextmanager
def _this_dlbench_first() -> Iterator[None]:
    """PYTHONPATH, which the notebook's kernel inherits, with this dlbench first."""
    before = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(SRC), before]))
    try:
        yield
    finally:
        if before is None:
            del os.environ["PYTHONPATH"]
        else:
            os.environ["PYTHONPATH"] = before


def render(notebook: Path, summary: Path, executed: Path, html: Path) -> None:
    """The report of `summary` as `html`, from the head `notebook` and its sections; the
    executed notebook (its input beside it, *.input.ipynb) is kept as `executed`."""
    import jupytext
    import nbconvert
    import papermill

    from dlbench.analysis.summary import load, scenarios

    executed.parent.mkdir(parents=True, exist_ok=True)
    source = executed.with_name(executed.stem + ".input.ipynb")
    jupytext.write(compose(notebook, scenarios(load(summary))), source)
    with _this_dlbench_first():
        papermill.execute_notebook(
            source, executed, parameters={"summary": str(summary)}, kernel_name="python3",
            progress_bar=False,
        )
    body, _ = nbconvert.HTMLExporter(exclude_input=True).from_filename(str(executed))
    write_text_atomic(html, finish(body))
