"""dlbench: reproducible benchmarks of deep-learning frameworks.

Importing the package stays light: frameworks are imported only inside their own
backend module (dlbench.frameworks.<name>), in the process that measures a cell.
"""

from pathlib import Path

__version__ = "0.1.0"

# The package is used from its repository (editable install or PYTHONPATH=src): the
# workflow's schemas are the contract between measuring, aggregating and reporting.
REPO_ROOT = Path(__file__).resolve().parents[2]
SCHEMA_DIR = REPO_ROOT / "workflow" / "schemas"
