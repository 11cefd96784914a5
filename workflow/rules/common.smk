# The matrix: validated config → cells with stable ids. No rules here.
import sys
from pathlib import Path

SRC = str(Path(workflow.basedir) / "src")
sys.path.insert(0, SRC)

from dlbench import config as dlbench_config
from dlbench.matrix import expand_cells

try:
    SETTINGS = dlbench_config.validate(config, source="config")
except dlbench_config.ConfigError as error:
    raise WorkflowError(str(error)) from None

CELLS = {cell.id: cell for cell in expand_cells(SETTINGS)}
MEASUREMENT = SETTINGS["measurement"]


wildcard_constraints:
    # Only ids of this matrix: no config value reaches a path or a shell command unchecked.
    cell="|".join(sorted(CELLS, key=len, reverse=True)),


def cell_args(wildcards):
    """The `dlbench run` arguments of one cell, with the measurement settings."""
    settings = [
        f"--{key.replace('_', '-')}={value}" for key, value in MEASUREMENT.items()
    ]
    return " ".join(CELLS[wildcards.cell].cli_args() + settings)


def cell_runs(wildcards):
    """Whether the cell measures (and so needs its device), or only records why not."""
    return CELLS[wildcards.cell].unsupported_reason() is None


def cell_threads(wildcards):
    return MEASUREMENT["threads"] if cell_runs(wildcards) else 1


def cell_gpus(wildcards):
    return int(CELLS[wildcards.cell].device == "gpu" and cell_runs(wildcards))


def cell_env(wildcards):
    return f"../../envs/{CELLS[wildcards.cell].framework}.yaml"
