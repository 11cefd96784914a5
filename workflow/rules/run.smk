# One job per cell, each in its own process; the harness holds a host-wide device lock
# while it measures, so timing cells never overlap whatever --cores allows.


rule measure_cell:
    output:
        "results/runs/{cell}.json",
    log:
        "logs/runs/{cell}.log",
    params:
        args=cell_args,
        src=SRC,
        python=PYTHON,
    threads: cell_threads
    resources:
        gpu=cell_gpus,
        # SLURM: partition, constraint, GPU model and --exclusive from the config's
        # `cluster:` keys; runtime and memory (growing with each attempt) are set per rule
        # in workflow/profiles/slurm.
        **CELL_CLUSTER_RESOURCES,
    conda:
        cell_env
    shell:
        "PYTHONPATH={params.src:q} {params.python:q} -m dlbench run {params.args} --out {output:q}"
        " > {log:q} 2>&1"
