"""Render the report: the head notebook, one section per scenario of the summary, the
efficiency section and the tail, composed into one notebook, executed by papermill on the
summary and the machine's peaks, as HTML without code cells, finished as a page of its own
(dlbench.report.page: offline, a table of contents, a print stylesheet).

The notebooks are jupytext percent scripts: `<head>` (e.g. workflow/notebooks/report.py),
and beside it `sections/<scenario>.py` for a scenario with a section of its own,
`sections/generic.py` for any other (its `scenario` set to the scenario's name), then
`sections/_efficiency.py` and `sections/_tail.py`, for what applies to every scenario.
Each section's own cell tagged "parameters" (its defaults, so that it runs alone) gives
way to the head's parameters. `dlbench compare` renders its page the same way from a
notebook of its own.
"""

import os
import re
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from dlbench.files.atomic import naming_a_full_disk, write_text_atomic
from dlbench.report.page import figure_texts, finish

if TYPE_CHECKING:
    from nbformat import NotebookNode

# The notebooks import dlbench: the kernel must find this one, whoever calls render().
SRC = Path(__file__).resolve().parents[2]
SECTIONS = "sections"
GENERIC = "generic"
TAIL = "_tail"
# After the scenarios' sections, for the cells of every scenario.
COMMON = ("_efficiency", TAIL)
# A scenario's name finds its section file: only plain names, never generic's or the tail's.
_SECTION_NAME = re.compile(r"[a-z0-9][a-z0-9_-]*")


def section_files(notebook: Path, scenarios: list[str]) -> list[tuple[Path, str | None]]:
    """(section file, scenario to set or None) for each scenario, then the common ones."""
    folder = Path(notebook).parent / SECTIONS
    files = []
    for scenario in scenarios:
        own = folder / f"{scenario}.py"
        if _SECTION_NAME.fullmatch(scenario) and scenario != GENERIC and own.is_file():
            files.append((own, None))
        else:
            files.append((folder / f"{GENERIC}.py", scenario))
    return files + [(folder / f"{name}.py", None) for name in COMMON]


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


def render(notebook: Path, summary: Path, executed: Path, html: Path,
           peaks: Sequence[Path] = ()) -> None:
    """The report of `summary` as `html`, from the head `notebook` and its sections, with
    the machine's GEMM `peaks` (`dlbench peak`'s files); the executed notebook (its input
    beside it, *.input.ipynb) is kept as `executed`."""
    from dlbench.analysis.present import scenarios_in

    execute(compose(notebook, scenarios_in(summary)),
            {"summary": str(summary), "peaks": [str(p) for p in peaks]}, executed, html)


def render_compare(notebook: Path, baseline: Path, new: Path, executed: Path,
                   html: Path) -> None:
    """The comparison of two result sets as `html`, from the notebook `notebook` (e.g.
    workflow/notebooks/compare.py), rendered like the report."""
    import jupytext

    execute(jupytext.read(notebook), {"baseline": str(baseline), "new": str(new)},
            executed, html)


def execute(notebook: "NotebookNode", parameters: dict, executed: Path, html: Path) -> None:
    """Run the notebook with papermill on `parameters`, keep it as `executed` (its input
    beside it, *.input.ipynb) and write it as `html` without code cells."""
    import jupytext
    import nbconvert
    import nbformat
    import papermill

    executed.parent.mkdir(parents=True, exist_ok=True)
    source = executed.with_name(executed.stem + ".input.ipynb")
    # The notebooks are logs, written in place (a failed report's executed notebook is kept
    # to read why); on a full disk the error still names them.
    with naming_a_full_disk(source, atomic=False):
        jupytext.write(notebook, source)
    with _this_dlbench_first(), naming_a_full_disk(executed, atomic=False):
        # Saved once at the end (and where a cell fails), not after every cell: each save
        # writes every figure so far again, 2.5 of a 9.5-s report here.
        papermill.execute_notebook(
            source, executed, parameters=parameters, kernel_name="python3",
            progress_bar=False, request_save_on_cell_execute=False,
        )
    notebook = nbformat.read(executed, as_version=4)
    body, _ = nbconvert.HTMLExporter(exclude_input=True).from_notebook_node(notebook)
    write_text_atomic(html, finish(body, figure_texts(notebook)))
