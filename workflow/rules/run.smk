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
    threads: cell_threads
    resources:
        gpu=cell_gpus,
    conda:
        cell_env
    shell:
        "PYTHONPATH={params.src:q} python -m dlbench run {params.args} --out {output:q}"
        " > {log:q} 2>&1"
