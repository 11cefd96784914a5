# The measuring jobs; the harness holds a host-wide device lock while it measures, so
# timing cells never overlap whatever --cores allows.
# measurement.process: per_cell - one job and one process per cell (a cell that crashes or
# times out fails its job and leaves its record in results/failed/); per_group - one job
# and one process per group of cells sharing framework, model, device and optimization,
# writing the same per-cell results (a crash is that cell's `error`, the others are kept).

if not PER_GROUP:

    rule measure_cell:
        input:
            # The shared weights and the reference output (see reference.smk).
            unpack(reference_files),
        output:
            "results/runs/{cell}.json",
        log:
            "logs/runs/{cell}.log",
        params:
            args=cell_args,
            reference=reference_args,
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
            " --failed-out results/failed/{wildcards.cell}.json > {log:q} 2>&1"

else:

    rule measure_group:
        input:
            unpack(reference_files),
        output:
            group_outputs(),
        log:
            "logs/groups/{framework}_{model}_{device}_{optimization}.log",
        wildcard_constraints:
            framework=axis_constraint("frameworks"),
            model=axis_constraint("models"),
            device=axis_constraint("devices"),
            optimization=axis_constraint("optimizations"),
        params:
            args=cell_args,
            reference=reference_args,
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
            " {params.reference} --out-dir results/runs > {log:q} 2>&1"
