# The matrix: validated config → cells with stable ids. No rules here.
import sys
from pathlib import Path

SRC = str(Path(workflow.basedir) / "src")
sys.path.insert(0, SRC)

from snakemake_interface_executor_plugins.settings import DeploymentMethod

from dlbench import config as dlbench_config
from dlbench.matrix import expand_cells

# `--config` values arrive as strings: read them as YAML, like a config file's.
dlbench_config.type_command_line(config, workflow.config_settings.overwrite_config)
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
    """The `dlbench run` arguments of one cell, with the measurement settings (sorted:
    the order of keys in a config file must not count as a change of parameters)."""
    settings = [
        f"--{key.replace('_', '-')}={value}" for key, value in sorted(MEASUREMENT.items())
    ]
    return " ".join(CELLS[wildcards.cell].cli_args() + settings)


def cell_runs(wildcards):
    """Whether the cell measures (and so needs its device), or only records why not."""
    return CELLS[wildcards.cell].unsupported_reason() is None


def cell_threads(wildcards):
    return MEASUREMENT["threads"] if cell_runs(wildcards) else 1


def cell_gpus(wildcards):
    return int(CELLS[wildcards.cell].device == "gpu" and cell_runs(wildcards))


def cell_cpu_timing(wildcards):
    """1 for a cell timed on the CPU: with the profile's cpu_timing=1, Snakemake starts one
    at a time and gives the other cores to cheap jobs (the harness's lock is the guarantee)."""
    return int(CELLS[wildcards.cell].device == "cpu" and cell_runs(wildcards))


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


# The correctness check's shared inputs (the rules are in reference.smk): seeded weights
# per model and a reference output per (model, batch, length), for the cells that apply.


def reference_constraint(field):
    """A wildcard constraint admitting exactly the values of `field` among applicable cells."""
    values = {
        str(getattr(cell, field)) for cell in CELLS.values() if cell.unsupported_reason() is None
    }
    return "|".join(sorted(values, key=len, reverse=True)) or "^$"


def reference_files(wildcards):
    """The weights and reference output a cell reads (none for a cell that cannot apply)."""
    cell = CELLS[wildcards.cell]
    if cell.unsupported_reason() is not None:
        return {}
    return {
        "weights": f"results/reference/{cell.model}/model.safetensors",
        "reference": f"results/reference/{cell.model}/b{cell.batch}_s{cell.seqlen}.npz",
    }


def reference_args(wildcards, input):
    """The `dlbench run` arguments naming those files."""
    return " ".join(f"--{name}={path}" for name, path in input.items())


def reference_mem_mb(wildcards, attempt):
    """Host memory of a reference job: the fp32 weights about twice over, plus the framework
    (XLM-2048's weights job peaked at 2.9 GB, its batch-8 reference output at 4.1 GB)."""
    from dlbench.models import get_model

    return int((2000 + 8 * get_model(wildcards.model).millions) * attempt)
