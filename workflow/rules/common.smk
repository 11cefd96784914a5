# The matrix: validated config → cells, each knowing its id and paths. No rules here.
import time

RUN_STARTED = time.time()  # when Snakemake read the workflow: the run's wall starts here

import functools
import json
import mimetypes
import sys
from pathlib import Path

SRC = str(Path(workflow.basedir) / "src")
sys.path.insert(0, SRC)

from snakemake_interface_executor_plugins.settings import DeploymentMethod

from dlbench.plan import config as dlbench_config
from dlbench.files import paths
from dlbench.catalogue import frameworks
from dlbench.plan import rounds
from dlbench.plan.jobs import job_args
from dlbench.plan.matrix import (
    DEFAULT_SCENARIO,
    Cell,
    expand_cells,
    group_outputs,
    side_by_side_outputs,
)

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
# that differ only in their sizes, where their scenario allows it (see run.smk).
# side_by_side: one job per scenario, model and device that measures every recipe's group
# side by side, their processes taking turns at the CPU (dlbench.run.side_by_side).
PROCESS = MEASUREMENT["process"]
# Each measuring job's cells, by the job's key (Cell.unit): a cell, a group or a
# side-by-side unit.
UNITS = rounds.units(CELLS.values(), PROCESS)
GROUPS = {key: cells for key, cells in UNITS.items() if cells[0].grouped(PROCESS)}
SIDE_BY_SIDE = {key: cells for key, cells in UNITS.items() if cells[0].side_by_side(PROCESS)}
SINGLE = [cells[0] for key, cells in UNITS.items()
          if key not in GROUPS and key not in SIDE_BY_SIDE]
# Each scenario's groups and side-by-side units have rules of their own (their outputs
# have its cells' shape, see run.smk): by scenario, the groups' output patterns, heads and
# tails, and the side-by-side units' output patterns. A side-by-side job's unit comes from
# its scenario, model and device; its rule's wildcards are the model and device, and
# `for_scenario` tells the rule's functions its scenario.
SIDE_BY_SIDE_KEYS = {(cells[0].scenario, cells[0].model, cells[0].device): key
                     for key, cells in SIDE_BY_SIDE.items()}


def by_scenario(units):
    found = {}
    for key, cells in units.items():
        found.setdefault(cells[0].scenario, {})[key] = cells
    return found


try:
    GROUP_RULES = {scenario: group_outputs([cell for group in groups.values() for cell in group])
                   for scenario, groups in by_scenario(GROUPS).items()}
    SIDE_BY_SIDE_OUTPUTS = {scenario: side_by_side_outputs(units)
                            for scenario, units in by_scenario(SIDE_BY_SIDE).items()}
except ValueError as error:
    raise WorkflowError(str(error)) from None


def measuring_rule(kind, scenario):
    """The name of a scenario's measuring rule of a kind (measure_group or
    measure_side_by_side), inference's as v1 named it (its cell ids have no scenario
    either), another's with its scenario's name."""
    return kind if scenario == DEFAULT_SCENARIO else f"{kind}_{scenario}"


# measurement.rounds: each measuring job (a unit) runs once per round of its scenario,
# the jobs of a device one after the other in the order of dlbench.plan.rounds (A B C,
# C B A, …); every job waits for the one before it. The rounds before a unit's last write
# results/rounds/r<round>/; the last one combines them into the cells' results.
UNIT_ROUNDS = {key: rounds.unit_rounds(cells, SETTINGS) for key, cells in UNITS.items()}
CHAINS = rounds.schedule(UNITS, UNIT_ROUNDS, SETTINGS["scenarios"])
PREVIOUS = rounds.previous(CHAINS)
EARLY_ROUNDS = sorted({r for chain in CHAINS.values() for _, r in chain
                       if r < max(UNIT_ROUNDS.values(), default=1) - 1}) or [-1]
EARLY_SINGLE = sorted({cell.id for cell in SINGLE if UNIT_ROUNDS[cell.id] > 1}) or ["^$"]
# The scenarios whose groups, or side-by-side units, have rounds before their last.
EARLY_GROUPS = sorted({cells[0].scenario for key, cells in GROUPS.items()
                       if UNIT_ROUNDS[key] > 1})
EARLY_SIDE_BY_SIDE = sorted({cells[0].scenario for key, cells in SIDE_BY_SIDE.items()
                             if UNIT_ROUNDS[key] > 1})


def round_outputs(patterns):
    """A job's records of an early round: one per cell, as its last round's results."""
    return [paths.round_result("{round}", Path(pattern).stem) for pattern in patterns]


def side_by_side_unit(scenario):
    """A side-by-side job's unit id as a pattern of its rule's wildcards (its log's name)."""
    return Cell(scenario, "", "{model}", "{device}", "").side_by_side_id


def side_by_side_wildcards(scenario):
    """The values a side-by-side rule's wildcards may take: its models', its devices'."""
    keys = [key for key in SIDE_BY_SIDE_KEYS if key[0] == scenario]
    return {"model": alternatives(model for _, model, _ in keys),
            "device": alternatives(device for _, _, device in keys)}


class ToldWildcards(dict):
    """A rule's wildcards by name and as attributes, as Snakemake gives them, and more."""

    def __getattr__(self, name):
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None


def for_scenario(function, scenario):
    """`function` of a side-by-side rule's wildcards, told the rule's scenario (no wildcard
    names it). Snakemake passes a function the arguments its signature names: the
    original's, which `wraps` shows."""

    @functools.wraps(function)
    def told(wildcards, *args, **kwargs):
        return function(ToldWildcards(wildcards.items(), scenario=scenario), *args, **kwargs)

    return told


def side_by_side_resources(scenario):
    """A side-by-side rule's resources, as a measuring job's, told its scenario."""
    resources = {"gpu": cell_gpus, "cpu_timing": cell_cpu_timing, **CELL_CLUSTER_RESOURCES}
    return {name: for_scenario(function, scenario) for name, function in resources.items()}


# The logs that `snakemake --report` shows are plain text.
mimetypes.add_type("text/plain", ".log")


# Cheap jobs run in the main Snakemake process, not as cluster jobs (see the slurm profile).
localrules:
    all,
    aggregate,
    report,


def alternatives(values):
    """A wildcard constraint admitting exactly these values: no config value reaches a path
    or a shell command unchecked."""
    import re

    values = {str(value) for value in values}
    return "|".join(re.escape(v) for v in sorted(values, key=len, reverse=True))


def job_cells(wildcards):
    """The cells a measuring job measures: its cell, its group's, or its side-by-side
    unit's."""
    return [CELLS[wildcards.cell]] if "cell" in wildcards.keys() else UNITS[job_key(wildcards)]


def job_key(wildcards):
    """The unit a measuring job measures: its cell's id, its group's, or its side-by-side
    unit's (from its model and device)."""
    if "cell" in wildcards.keys():
        return wildcards.cell
    if "model" in wildcards.keys():
        return SIDE_BY_SIDE_KEYS[(wildcards.scenario, wildcards.model, wildcards.device)]
    return f"{wildcards.head}_{wildcards.tail}"


def job_round(wildcards):
    """The round a measuring job measures: its wildcard's, or its unit's last round."""
    if "round" in wildcards.keys():
        return int(wildcards.round)
    return UNIT_ROUNDS[job_key(wildcards)] - 1


def unit_output(key, round_):
    """The first output of a unit's job of one round: a result for its last round."""
    cell = UNITS[key][0]
    if round_ == UNIT_ROUNDS[key] - 1:
        return cell.result_path
    return paths.round_result(round_, cell.id)


def previous_job(wildcards):
    """The output of the job before this one in its device's rounds, as an input that
    orders them and nothing more (ancient: its date never makes this job run again)."""
    before = PREVIOUS.get((job_key(wildcards), job_round(wildcards)))
    return [] if before is None else ancient(unit_output(*before))


def earlier_rounds(wildcards):
    """The last round's job reads its cells' earlier rounds, to combine them."""
    key, round_ = job_key(wildcards), job_round(wildcards)
    if round_ != UNIT_ROUNDS[key] - 1:
        return []
    return [paths.round_result(r, cell.id) for r in range(round_) for cell in UNITS[key]]


def cell_args(wildcards):
    """The `dlbench run` options of one cell, or of a group's cells (each size option then
    lists its values); in rounds, its round, and for the last the rounds to combine."""
    args = job_args(job_cells(wildcards), "cell" not in wildcards.keys(), SETTINGS)
    key = job_key(wildcards)
    if UNIT_ROUNDS[key] > 1:
        round_ = job_round(wildcards)
        args.append(f"--round={round_}")
        if round_ == UNIT_ROUNDS[key] - 1:
            args.append(f"--rounds-dir={paths.ROUNDS}")
    return " ".join(args)


def job_device(wildcards):
    """The device a measuring job uses: its cells', or a peak job's own (peak.smk)."""
    if "precision" in wildcards.keys():
        return wildcards.device
    return job_cells(wildcards)[0].device


def cell_runs(wildcards):
    """Whether the job measures (and so needs its device), or only records why not; a peak
    job always measures."""
    if "precision" in wildcards.keys():
        return True
    return any(cell.unsupported_reason() is None for cell in job_cells(wildcards))


def cell_threads(wildcards):
    return MEASUREMENT["threads"] if cell_runs(wildcards) else 1


def cell_gpus(wildcards):
    return int(job_device(wildcards) == "gpu" and cell_runs(wildcards))


def cell_cpu_timing(wildcards):
    """1 for a job timed on the CPU: with the profile's cpu_timing=1, Snakemake starts one
    at a time and gives the other cores to cheap jobs (the harness's lock is the guarantee)."""
    return int(job_device(wildcards) == "cpu" and cell_runs(wildcards))


def framework_env(framework):
    """A framework's conda environment file (its declaration's), as a rule names it."""
    return f"../../{frameworks.get(framework).environment}"


def cell_env(wildcards):
    return framework_env(job_cells(wildcards)[0].framework)


# A side-by-side job runs every framework's recipes of a model: every framework's packages.
SIDE_BY_SIDE_ENV = "../../envs/side_by_side.yaml"


def cell_inputs(wildcards):
    """The shared files a job's cells read (weights, references, data sets), by name; none
    for cells that cannot apply."""
    inputs = {}
    for cell in job_cells(wildcards):
        if cell.unsupported_reason() is None:
            for name, path in cell.spec.inputs(cell).items():
                inputs.setdefault(name, [])
                if path not in inputs[name]:
                    inputs[name].append(path)
    return inputs


def input_args(wildcards, input):
    """The `dlbench run` options naming those files (the rules' param `reference`)."""
    cells = job_cells(wildcards)
    group = "cell" not in wildcards.keys()
    return " ".join(cells[0].spec.input_args(cells, input, group))


# SLURM resources of a cell (used by the slurm profile's executor; local runs ignore them).
# Each is None (unset) where it does not apply, and only keys the config sets are added,
# so the profile's or the command line's defaults still apply to the others.


def cell_partition(wildcards):
    """The config's GPU partition for GPU cells, its partition for the others."""
    gpu = job_device(wildcards) == "gpu" and CLUSTER["gpu_partition"]
    return gpu or CLUSTER["partition"] or None


def cell_constraint(wildcards):
    """One node type (a SLURM feature) for every measuring cell."""
    return CLUSTER["constraint"] if cell_runs(wildcards) else None


def cell_gpu_model(wildcards):
    """One GPU type for every GPU cell: --gpus=<model>:1."""
    return CLUSTER["gpu_model"] if cell_gpus(wildcards) else None


def cell_slurm_extra(wildcards):
    """Whole nodes for measuring CPU cells: no other job shares the cores while timing."""
    exclusive = cell_runs(wildcards) and job_device(wildcards) == "cpu"
    return "--exclusive" if exclusive else None


def measuring_logs(wildcards):
    """The measuring jobs' logs, for `snakemake --report` (the provenance view): each where
    it exists or its cell is about to be measured. A missing log alone must never make
    Snakemake measure a finished cell again."""
    logs = {}
    for cell in CELLS.values():
        log = cell.log_path(PROCESS)
        if Path(log).exists() or not Path(cell.result_path).exists():
            logs[log] = True
    return sorted(logs)


def cell_cluster_resources():
    """The `cluster:` keys of the config as measuring jobs' resources (those that are set)."""
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


# The results folder's lock while this run holds it: one run at a time (dlbench.run.runlock).
RESULTS_LOCK = None


def lock_results_folder():
    """Refuse to start if another run is using the results folder."""
    global RESULTS_LOCK
    from dlbench.run import runlock

    try:
        RESULTS_LOCK = runlock.acquire(Path(paths.RUN_LOCK))
    except runlock.ResultsFolderBusy as error:
        raise WorkflowError(str(error)) from None


def unlock_results_folder():
    from dlbench.run import runlock

    runlock.release(RESULTS_LOCK)


def keep_previous_outputs():
    """The previous run's summary and report, kept until this run completes."""
    from dlbench.run import keep

    keep.keep()


def put_back_previous_outputs():
    """Snakemake records a failed job as having made its outputs from this run's inputs:
    for a file put back, that record goes, so that its date (older than the new inputs)
    makes the next run make it again."""
    from snakemake.io import IOFile

    from dlbench.run import keep

    for path in keep.put_back():
        workflow.persistence.cleanup_metadata(IOFile(str(path)))


def print_measuring_share():
    """How much of this run's wall time was measuring (dlbench.records.measuring): its
    cells' timed loops against the time since Snakemake read the workflow."""
    from dlbench.records import measuring

    found = measuring.share([cell.result_path for cell in CELLS.values()], RUN_STARTED,
                            time.time())
    print(measuring.describe(found), file=sys.stderr)


def drop_previous_outputs():
    from dlbench.run import keep

    keep.drop()


def report_after_failure():
    """Summary and report even when cells crashed or timed out (see dlbench.recovery)."""
    try:
        from dlbench import recovery

        recovery.summarize_failed_run(
            CELLS.values(), MEASUREMENT, Path(workflow.basedir) / "workflow/notebooks/report.py",
            mix_foreign=SETTINGS["report"]["mix_foreign"],
        )
    except Exception as error:  # the run has failed already: say why this failed too
        print(f"dlbench: no summary or report for this failed run: {error}", file=sys.stderr)


# The training data sets that the matrix's cells read (the rule is in data.smk).
DATASETS = sorted({cell.size("dataset") for cell in CELLS.values()
                   if cell.unsupported_reason() is None and "data" in cell.spec.inputs(cell)})


# Snakemake does not look inside an existing output folder: a data set that the matrix
# reads and that no longer matches its manifest (a file missing or of another size, the
# manifest edited or unreadable: dlbench.data.folder_damage, which reads no image) is moved
# aside, to results/data/.<name>.damaged (kept for a look), so that the dataset rule builds
# it again before the next cell that reads it. Results already there stay: a cell whose
# damaged set made it an `error` is measured again once its result is deleted.
def move_damaged_datasets_aside():
    import shutil

    from dlbench.data import folder_damage

    for name in DATASETS:
        folder = Path(paths.dataset(name))
        problems = folder_damage(folder)
        if problems:
            aside = folder.with_name(f".{name}.damaged")
            shutil.rmtree(aside, ignore_errors=True)
            folder.rename(aside)
            more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
            print(f"dlbench: {folder} is damaged, building it again (the damaged one is "
                  f"kept in {aside}): {problems[0]}{more}", file=sys.stderr)


if workflow.is_main_process:  # not again in each cluster job
    move_damaged_datasets_aside()


def dataset_args(wildcards):
    """The data set's own options: sizes and seed, or the folder CIFAR-10 is read from
    (checked to exist when the config was validated, and quoted)."""
    import shlex

    data = SETTINGS["data"]
    if wildcards.dataset == "cifar10":
        return f"--cifar10-dir={shlex.quote(data['cifar10_dir'])}"
    return (f"--train={data['synthetic_train']} --test={data['synthetic_test']}"
            f" --seed={data['seed']}")


# The correctness check's shared inputs (the rules are in reference.smk): seeded weights
# per model and a reference output per (model, batch, length), for the cells that read them.
REFERENCED = [cell for cell in CELLS.values()
              if cell.unsupported_reason() is None and "weights" in cell.spec.inputs(cell)]


def reference_constraint(field):
    """A wildcard constraint admitting exactly the values of `field` among those cells."""
    values = [cell.model if field == "model" else cell.size(field) for cell in REFERENCED
              if field == "model" or field in dict(cell.sizes)]
    return alternatives(values) or "^$"


def reference_mem_mb(wildcards, attempt):
    """Host memory of a reference job: the fp32 weights about twice over, plus the framework
    (XLM-2048's weights job peaked at 2.9 GB, its batch-8 reference output at 4.1 GB)."""
    from dlbench.catalogue.models import get_model

    return int((2000 + 8 * get_model(wildcards.model).millions) * attempt)


# The machine's limits, measured by peak.smk: one GEMM peak per device and precision of
# the cells that can run, at the measurement's thread count; the report reads them.

PEAK_KEYS = sorted({(cell.device, cell.spec.precision(cell.optimization))
                    for cell in CELLS.values() if cell.unsupported_reason() is None})
PEAKS = [paths.peak(device, precision, MEASUREMENT["threads"])
         for device, precision in PEAK_KEYS]


def peak_constraint(position):
    """A wildcard constraint admitting the devices (0) or precisions (1) of those peaks."""
    return alternatives(key[position] for key in PEAK_KEYS) or "^$"
