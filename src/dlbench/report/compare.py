"""`dlbench compare A B`: two result sets as a table in the terminal, a CSV and an HTML page
(the comparison itself is dlbench.analysis.compare); with --interleave, A and B are two
checkouts or configs measured alternately first (dlbench.run.interleave)."""

import sys
import tempfile
from pathlib import Path

import pandas as pd

from dlbench.analysis.compare import DRIFT_FLOOR
from dlbench.files import atomic
from dlbench.format import count
from dlbench.records import result
from dlbench.report import SRC

NOTEBOOK = SRC.parent / "workflow" / "notebooks" / "compare.py"


def comparison(baseline: Path, new: Path, floor: float | None = None):
    """The two result sets compared: round by round where they are the two sides of one
    interleaved run (their interleave.json), else with the drift floor (None: the
    default)."""
    from dlbench.analysis import resultset
    from dlbench.analysis.compare import compare
    from dlbench.run import interleave

    return compare(resultset.load(baseline), resultset.load(new),
                   interleaved=interleave.interleaved(baseline, new),
                   floor=DRIFT_FLOOR if floor is None else floor)


def run(baseline: Path, new: Path, csv: Path | None = None, html: Path | None = None,
        notebook: Path = NOTEBOOK, executed: Path | None = None,
        floor: float = DRIFT_FLOOR) -> int:
    """Compare, print, write the files asked for; 1 with a message if a set cannot be read."""
    from dlbench.analysis import resultset

    try:
        compared = comparison(baseline, new, floor)
    except (resultset.ResultSetError, result.ResultError) as exc:
        print(f"dlbench compare: {exc}", file=sys.stderr)
        return 1
    print(text(compared))
    if csv is not None:
        with atomic.replacing(csv) as tmp:
            table(compared).to_csv(tmp, index=False)
    if html is not None:
        if not Path(notebook).is_file():
            print(f"dlbench compare: {notebook}: no such notebook (give --notebook)",
                  file=sys.stderr)
            return 1
        import jupytext

        from dlbench.report import execute

        with tempfile.TemporaryDirectory() as tmp:
            execute(jupytext.read(notebook), {"baseline": str(baseline), "new": str(new),
                                              "floor": floor},
                    executed or Path(tmp) / "compare.ipynb", html)
    return 0


def run_interleaved(baseline: Path, new: Path, work: Path, rounds: int,
                    configfile: Path | None = None, **outputs) -> int:
    """Measure the two sides alternately (dlbench.run.interleave), then compare them."""
    from dlbench.run import interleave

    try:
        a, b = interleave.run(baseline, new, work, rounds, configfile,
                              log=lambda line: print(line, file=sys.stderr, flush=True))
    except interleave.InterleaveError as exc:
        print(f"dlbench compare --interleave: {exc}", file=sys.stderr)
        return 1
    return run(a, b, **outputs)


def table(comparison) -> pd.DataFrame:
    """Every cell of either set: those of both as compared (`verdict`), then those of one
    set with the verdict 'only in baseline' or 'only in new'."""
    alone = [frame.rename(columns={"status": f"{side}_status"}).assign(verdict=f"only in {side}")
             for side, frame in (("baseline", comparison.only_baseline),
                                 ("new", comparison.only_new)) if not frame.empty]
    return pd.concat([comparison.cells, *alone], ignore_index=True)


def text(comparison) -> str:
    """The comparison for the terminal: the warning, the table, the cells of one set."""
    from dlbench.analysis.compare import readable

    lines = [f"baseline: {comparison.baseline}", f"new:      {comparison.new}"]
    if not comparison.environment.empty:
        lines += ["", "WARNING: the environments differ in what matters for a comparison:"]
        lines += [f"  {r.field}: {r.baseline} (baseline) vs {r.new} (new)"
                  for r in comparison.environment.itertuples()]
    cells = comparison.cells
    lines += ["", f"{comparison.headline()}.", f"How to read it: {comparison.rule()}."]
    if comparison.sees():
        lines += [f"What it can see: {comparison.sees()}."]
    if not cells.empty:
        lines += ["", readable(cells).to_string(index=False)]
    for side, alone in (("baseline", comparison.only_baseline), ("new", comparison.only_new)):
        if not alone.empty:
            lines += ["", f"{count(len(alone), 'cell')} only in {side}:"]
            lines += [f"  {r.cell_id} ({r.status})" for r in alone.itertuples()]
    return "\n".join(lines)
