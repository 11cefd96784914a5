# The measuring jobs; the harness holds a host-wide device lock while it measures, so
# timing cells never overlap whatever --cores allows.
# measure_cell - one job and one process per cell (a cell that crashes or times out fails
# its job and leaves its record in results/failed/); measure_group - with
# measurement.process: per_group, one job and one process per group of cells that differ
# only in their sizes, writing the same per-cell results (a crash is that cell's `error`,
# the others are kept). Paths and ids come from the cells (dlbench.plan.matrix).
# The shell commands and params are those of v1 for inference cells: Snakemake compares
# them with what it recorded, and a change would measure every finished cell again.

# Where a cell's record goes if it crashes or times out (dlbench.files.paths, as a pattern).
FAILED_OUT = paths.failed("{wildcards.cell}")

if SINGLE:

    rule measure_cell:
        input:
            # The shared files the cell reads (see reference.smk).
            unpack(cell_inputs),
            # In rounds: the job before this one, and this cell's earlier rounds.
            previous=previous_job,
            rounds=earlier_rounds,
        output:
            paths.result("{cell}"),
        log:
            paths.cell_log("{cell}"),
        wildcard_constraints:
            cell=alternatives(cell.id for cell in SINGLE),
        params:
            args=cell_args,
            reference=input_args,
            src=SRC,
            python=PYTHON,
        threads: cell_threads
        resources:
            gpu=cell_gpus,
            cpu_timing=cell_cpu_timing,
            # SLURM: partition, constraint, GPU model and --exclusive from the config's
            # `cluster:` keys; runtime and memory (growing with each attempt) are set per
            # rule in workflow/profiles/slurm.
            **CELL_CLUSTER_RESOURCES,
        conda:
            cell_env
        shell:
            "PYTHONPATH={params.src:q} {params.python:q} -m dlbench run {params.args}"
            " {params.reference} --out {output:q}"
            f" --failed-out {FAILED_OUT} > {{log:q}} 2>&1"


# One measure_group rule per scenario that groups its sizes (measuring_rule: inference's
# keeps v1's name): its outputs have the scenario's sizes.
for scenario, (outputs, heads, tails) in GROUP_RULES.items():

    rule:
        name:
            measuring_rule("measure_group", scenario)
        input:
            unpack(cell_inputs),
            previous=previous_job,
            rounds=earlier_rounds,
        output:
            # One per size of the group: results/runs/{head}_<sizes>_{tail}.json.
            outputs,
        log:
            paths.group_log("{head}_{tail}"),
        wildcard_constraints:
            head=alternatives(heads),
            tail=alternatives(tails),
        params:
            args=cell_args,
            reference=input_args,
            src=SRC,
            python=PYTHON,
        threads: cell_threads
        resources:
            gpu=cell_gpus,
            cpu_timing=cell_cpu_timing,
            **CELL_CLUSTER_RESOURCES,
        conda:
            cell_env
        shell:
            "PYTHONPATH={params.src:q} {params.python:q} -m dlbench run {params.args}"
            f" {{params.reference}} --out-dir {paths.RUNS} > {{log:q}} 2>&1"


# measure_side_by_side - with measurement.process: side_by_side, one job per model and
# device that measures every recipe's group of a scenario side by side. One rule per
# scenario (measuring_rule), whose functions are told the scenario (no wildcard names it).
for scenario, outputs in SIDE_BY_SIDE_OUTPUTS.items():

    rule:
        name:
            measuring_rule("measure_side_by_side", scenario)
        input:
            unpack(for_scenario(cell_inputs, scenario)),
            previous=for_scenario(previous_job, scenario),
            rounds=for_scenario(earlier_rounds, scenario),
        output:
            # Every recipe's cells of one model and device: results/runs/<id>.json.
            outputs,
        log:
            paths.group_log(side_by_side_unit(scenario)),
        wildcard_constraints:
            **side_by_side_wildcards(scenario),
        params:
            args=for_scenario(cell_args, scenario),
            reference=for_scenario(input_args, scenario),
            src=SRC,
            python=PYTHON,
        threads: for_scenario(cell_threads, scenario)
        resources:
            **side_by_side_resources(scenario),
        conda:
            SIDE_BY_SIDE_ENV
        shell:
            "PYTHONPATH={params.src:q} {params.python:q} -m dlbench run {params.args}"
            f" {{params.reference}} --out-dir {paths.RUNS} > {{log:q}} 2>&1"


# The rounds before a unit's last (measurement.rounds): the same measuring jobs, each
# writing its cells' records of the round to results/rounds/r<round>/, after the job
# before it in the device's order. A crash is the cell's error record of that round (the
# job succeeds, so that the rounds after it run); the last round's job combines them.

if EARLY_SINGLE != ["^$"]:

    rule measure_cell_round:
        input:
            unpack(cell_inputs),
            previous=previous_job,
        output:
            paths.round_result("{round}", "{cell}"),
        log:
            paths.round_log("{round}", "{cell}"),
        wildcard_constraints:
            cell=alternatives(EARLY_SINGLE),
            round=alternatives(EARLY_ROUNDS),
        params:
            args=cell_args,
            reference=input_args,
            src=SRC,
            python=PYTHON,
        threads: cell_threads
        resources:
            gpu=cell_gpus,
            cpu_timing=cell_cpu_timing,
            **CELL_CLUSTER_RESOURCES,
        conda:
            cell_env
        shell:
            "PYTHONPATH={params.src:q} {params.python:q} -m dlbench run {params.args}"
            " {params.reference} --out {output:q} > {log:q} 2>&1"


for scenario in EARLY_GROUPS:
    outputs, heads, tails = GROUP_RULES[scenario]

    rule:
        name:
            measuring_rule("measure_group", scenario) + "_round"
        input:
            unpack(cell_inputs),
            previous=previous_job,
        output:
            round_outputs(outputs),
        log:
            paths.round_log("{round}", "{head}_{tail}"),
        wildcard_constraints:
            head=alternatives(heads),
            tail=alternatives(tails),
            round=alternatives(EARLY_ROUNDS),
        params:
            args=cell_args,
            reference=input_args,
            src=SRC,
            python=PYTHON,
            out=paths.round_dir("{round}"),
        threads: cell_threads
        resources:
            gpu=cell_gpus,
            cpu_timing=cell_cpu_timing,
            **CELL_CLUSTER_RESOURCES,
        conda:
            cell_env
        shell:
            "PYTHONPATH={params.src:q} {params.python:q} -m dlbench run {params.args}"
            " {params.reference} --out-dir {params.out:q} > {log:q} 2>&1"


for scenario in EARLY_SIDE_BY_SIDE:

    rule:
        name:
            measuring_rule("measure_side_by_side", scenario) + "_round"
        input:
            unpack(for_scenario(cell_inputs, scenario)),
            previous=for_scenario(previous_job, scenario),
        output:
            round_outputs(SIDE_BY_SIDE_OUTPUTS[scenario]),
        log:
            paths.round_log("{round}", side_by_side_unit(scenario)),
        wildcard_constraints:
            **side_by_side_wildcards(scenario),
            round=alternatives(EARLY_ROUNDS),
        params:
            args=for_scenario(cell_args, scenario),
            reference=for_scenario(input_args, scenario),
            src=SRC,
            python=PYTHON,
            out=paths.round_dir("{round}"),
        threads: for_scenario(cell_threads, scenario)
        resources:
            **side_by_side_resources(scenario),
        conda:
            SIDE_BY_SIDE_ENV
        shell:
            "PYTHONPATH={params.src:q} {params.python:q} -m dlbench run {params.args}"
            " {params.reference} --out-dir {params.out:q} > {log:q} 2>&1"
