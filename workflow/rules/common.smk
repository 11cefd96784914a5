# The matrix: validated config → cells with stable ids. No rules here.
import sys
from pathlib import Path

SRC = str(Path(workflow.basedir) / "src")
sys.path.insert(0, SRC)

from snakemake_interface_executor_plugins.settings import DeploymentMethod

from dlbench import config as dlbench_config
from dlbench.matrix import expand_cells

try:
    SETTINGS = dlbench_config.validate(config, source="config")
except dlbench_config.ConfigError as error:
    raise WorkflowError(str(error)) from None

# Jobs run on Snakemake's own interpreter (no need to activate its venv), or under
# --use-conda on the python of the rule's environment.
USE_CONDA = DeploymentMethod.CONDA in workflow.deployment_settings.deployment_method
PYTHON = "python" if USE_CONDA else sys.executable

CELLS = {cell.id: cell for cell in expand_cells(SETTINGS)}
MEASUREMENT = SETTINGS["measurement"]
CLUSTER = SETTINGS["cluster"]


# Cheap jobs run in the main Snakemake process, not as cluster jobs (see the slurm profile).
localrules:
    all,
    aggregate,
    report,


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


# SLURM resources of a cell (used by the slurm profile's executor; local runs ignore them).
# Each is None (unset) where it does not apply, and only keys the config sets are added,
# so the profile's or the command line's defaults still apply to the others.


def cell_partition(wildcards):
    """The config's GPU partition for GPU cells, its partition for the others."""
    gpu = CELLS[wildcards.cell].device == "gpu" and CLUSTER["gpu_partition"]
    return gpu or CLUSTER["partition"] or None


def cell_constraint(wildcards):
    """One node type (a SLURM feature) for every measuring cell."""
    return CLUSTER["constraint"] if cell_runs(wildcards) else None


def cell_gpu_model(wildcards):
    """One GPU type for every GPU cell: --gpus=<model>:1."""
    return CLUSTER["gpu_model"] if cell_gpus(wildcards) else None


def cell_slurm_extra(wildcards):
    """Whole nodes for measuring CPU cells: no other job shares the cores while timing."""
    exclusive = cell_runs(wildcards) and CELLS[wildcards.cell].device == "cpu"
    return "--exclusive" if exclusive else None


def cell_cluster_resources():
    """The `cluster:` keys of the config as measure_cell resources (those that are set)."""
    resources = {}
    if CLUSTER["partition"] or CLUSTER["gpu_partition"]:
        resources["slurm_partition"] = cell_partition
    if CLUSTER["constraint"]:
        resources["constraint"] = cell_constraint
    if CLUSTER["gpu_model"]:
        resources["gpu_model"] = cell_gpu_model
    if CLUSTER["exclusive"]:
        resources["slurm_extra"] = cell_slurm_extra
    return resources


CELL_CLUSTER_RESOURCES = cell_cluster_resources()


def report_after_failure():
    """Summary and report even when cells crashed or timed out (see dlbench.recovery)."""
    from dlbench import recovery

    try:
        recovery.summarize_failed_run(
            CELLS.values(), MEASUREMENT, Path(workflow.basedir) / "workflow/notebooks/report.py"
        )
    except Exception as error:  # the run has failed already: say why this failed too
        print(f"dlbench: no summary or report for this failed run: {error}", file=sys.stderr)
