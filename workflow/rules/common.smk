# The matrix: validated config → cells with stable ids. No rules here.
import sys
from pathlib import Path

SRC = str(Path(workflow.basedir) / "src")
sys.path.insert(0, SRC)

from snakemake_interface_executor_plugins.settings import DeploymentMethod

from dlbench import config as dlbench_config
from dlbench.matrix import expand_cells
from dlbench.reference import output_name as reference_output_name

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
# per_cell: one job and one process per cell. per_group: one job per group of the cells
# that share framework, model, device and optimization (see run.smk).
PER_GROUP = MEASUREMENT["process"] == "per_group"
GROUPS = {}
for _cell in CELLS.values():
    GROUPS.setdefault(_cell.group_id, []).append(_cell)


# Cheap jobs run in the main Snakemake process, not as cluster jobs (see the slurm profile).
localrules:
    all,
    aggregate,
    report,


wildcard_constraints:
    # Only ids of this matrix: no config value reaches a path or a shell command unchecked.
    cell="|".join(sorted(CELLS, key=len, reverse=True)),


def job_cells(wildcards):
    """The cells a measuring job measures: its cell, or its group's cells."""
    if "cell" in wildcards.keys():
        return [CELLS[wildcards.cell]]
    group = "_".join(wildcards[key] for key in ("framework", "model", "device", "optimization"))
    return GROUPS[group]


def measurement_args():
    """The measurement settings as `dlbench run` arguments (sorted: the order of keys in a
    config file must not count as a change of parameters)."""
    return [
        f"--{key.replace('_', '-')}={value}"
        for key, value in sorted(MEASUREMENT.items())
        if key != "process"  # how jobs are cut, not how a cell is measured
    ]


def cell_args(wildcards):
    """The `dlbench run` arguments of one cell, or of a group's cells (--batch and
    --seqlen then list every value of the matrix)."""
    cells = job_cells(wildcards)
    if "cell" in wildcards.keys():
        return " ".join(cells[0].cli_args() + measurement_args())
    first = cells[0]
    args = [f"--framework={first.framework}", f"--model={first.model}",
            f"--device={first.device}", f"--optimization={first.optimization}",
            "--batch", *map(str, SETTINGS["batch_sizes"]),
            "--seqlen", *map(str, SETTINGS["sequence_lengths"])]
    return " ".join(args + measurement_args())


def cell_runs(wildcards):
    """Whether the job measures (and so needs its device), or only records why not."""
    return any(cell.unsupported_reason() is None for cell in job_cells(wildcards))


def cell_threads(wildcards):
    return MEASUREMENT["threads"] if cell_runs(wildcards) else 1


def cell_gpus(wildcards):
    return int(job_cells(wildcards)[0].device == "gpu" and cell_runs(wildcards))


def cell_cpu_timing(wildcards):
    """1 for a job timed on the CPU: with the profile's cpu_timing=1, Snakemake starts one
    at a time and gives the other cores to cheap jobs (the harness's lock is the guarantee)."""
    return int(job_cells(wildcards)[0].device == "cpu" and cell_runs(wildcards))


def cell_env(wildcards):
    return f"../../envs/{job_cells(wildcards)[0].framework}.yaml"


def group_outputs():
    """The result files of one group job: every batch × length of the matrix."""
    return expand(
        "results/runs/{{framework}}_{{model}}_{{device}}_b{batch}_s{seqlen}_{{optimization}}.json",
        batch=SETTINGS["batch_sizes"],
        seqlen=SETTINGS["sequence_lengths"],
    )


def axis_constraint(axis):
    """A wildcard constraint admitting exactly the config's values of one axis."""
    import re

    return "|".join(re.escape(str(v)) for v in sorted(SETTINGS[axis], key=len, reverse=True))


# SLURM resources of a cell (used by the slurm profile's executor; local runs ignore them).
# Each is None (unset) where it does not apply, and only keys the config sets are added,
# so the profile's or the command line's defaults still apply to the others.


def cell_partition(wildcards):
    """The config's GPU partition for GPU cells, its partition for the others."""
    gpu = job_cells(wildcards)[0].device == "gpu" and CLUSTER["gpu_partition"]
    return gpu or CLUSTER["partition"] or None


def cell_constraint(wildcards):
    """One node type (a SLURM feature) for every measuring cell."""
    return CLUSTER["constraint"] if cell_runs(wildcards) else None


def cell_gpu_model(wildcards):
    """One GPU type for every GPU cell: --gpus=<model>:1."""
    return CLUSTER["gpu_model"] if cell_gpus(wildcards) else None


def cell_slurm_extra(wildcards):
    """Whole nodes for measuring CPU cells: no other job shares the cores while timing."""
    exclusive = cell_runs(wildcards) and job_cells(wildcards)[0].device == "cpu"
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
    """The weights and reference outputs a job reads (none for cells that cannot apply)."""
    cells = [c for c in job_cells(wildcards) if c.unsupported_reason() is None]
    if not cells:
        return {}
    folder = f"results/reference/{cells[0].model}"
    return {
        "weights": f"{folder}/model.safetensors",
        "references": [f"{folder}/{reference_output_name(c.batch, c.seqlen)}" for c in cells],
    }


def reference_args(wildcards, input):
    """The `dlbench run` arguments naming those files: the reference output of one cell,
    or the folder of a group's."""
    if "weights" not in input.keys():
        return ""
    references = input.references
    if "cell" in wildcards.keys():
        return f"--weights={input.weights} --reference={references[0]}"
    return f"--weights={input.weights} --reference-dir={Path(input.weights).parent}"


def reference_mem_mb(wildcards, attempt):
    """Host memory of a reference job: the fp32 weights about twice over, plus the framework
    (XLM-2048's weights job peaked at 2.9 GB, its batch-8 reference output at 4.1 GB)."""
    from dlbench.models import get_model

    return int((2000 + 8 * get_model(wildcards.model).millions) * attempt)
