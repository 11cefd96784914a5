"""Render the report: the jupytext notebook, executed by papermill on a summary, as HTML
without code cells."""

from pathlib import Path

from dlbench.result import write_text_atomic


def render(notebook: Path, summary: Path, executed: Path, html: Path) -> None:
    import jupytext
    import nbconvert
    import papermill

    executed.parent.mkdir(parents=True, exist_ok=True)
    source = executed.with_name(executed.stem + ".input.ipynb")
    jupytext.write(jupytext.read(notebook), source)
    papermill.execute_notebook(
        source, executed, parameters={"summary": str(summary)}, kernel_name="python3",
        progress_bar=False,
    )
    body, _ = nbconvert.HTMLExporter(exclude_input=True).from_filename(str(executed))
    write_text_atomic(html, body)
