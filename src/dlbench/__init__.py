"""dlbench: reproducible benchmarks of deep-learning frameworks.

Importing the package stays light: frameworks are imported only inside their own
backend module (dlbench.frameworks.<name>), in the process that measures a cell.

The package is built in layers: every folder or module directly under dlbench/ belongs to
one layer of LAYERS, listed from the bottom up, and imports only from its own layer, the
layers below it and this module, beneath them all (tests/test_layout.py keeps it so,
imports inside functions included). From the bottom: `files` names every path the
workflow reads or writes, writes a file atomically and keeps temporary files, needing
nothing; the `catalogue`
declares once what a cell can be made of — the frameworks (each one's declaration, read
from its folder's light `about` and `recipes` modules, and the registry), the axes,
precisions, recipes, optimizers and models — which every layer above asks instead of
naming a framework; `format` writes values (numbers, reasons, framework names, text
escaped for a page), needing only the catalogue's names, so that every layer above writes
them alike; `measure` times, samples and checks, the same for every framework, naming
none; `data` builds the training data sets (under measure's device lock) and names their
pipelines' settings; `frameworks` implements the scenarios' operations in each framework
on top of all these; `scenarios` measures a cell through those operations, declares
their interfaces, and owns the cell and the codec of its command line; the `plan` is the
config and its matrix of the scenarios' cells; `records` are what a cell's measurement
writes, in the schema the scenarios compose; `run` measures the plan's cells in
supervised processes and writes their records; the `analysis` derives tables, flags and
plots from the records' summary; the `report` renders the analysis; and on top the entry
points compose them all: the `dlbench` command (cli.py, __main__.py), the reference rules'
command (reference.py), the workflow's handler of a failed run (recovery.py) and the warm
parent that forks `dlbench run` jobs from a process that has imported their framework
(warm.py).
"""

from pathlib import Path

__version__ = "0.1.0"

# The layers, from the bottom up: each names the packages and modules directly under
# dlbench/ that it holds (see above). A new folder or module takes its place here.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("files",),
    ("catalogue",),
    ("format",),
    ("measure",),
    ("data",),
    ("frameworks",),
    ("scenarios",),
    ("plan",),
    ("records",),
    ("run",),
    ("analysis",),
    ("report",),
    ("cli", "__main__", "reference", "recovery", "warm"),
)

# The package is used from its repository (editable install or PYTHONPATH=src): the
# workflow's schemas are the contract between measuring, aggregating and reporting.
REPO_ROOT = Path(__file__).resolve().parents[2]
SCHEMA_DIR = REPO_ROOT / "workflow" / "schemas"
