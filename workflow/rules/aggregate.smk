# All cells of the matrix → one tidy table (each result validated against its schema).


rule aggregate:
    input:
        expand("results/runs/{cell}.json", cell=CELLS),
    output:
        parquet="results/summary.parquet",
        csv="results/summary.csv",
    log:
        "logs/aggregate.log",
    params:
        src=SRC,
        python=PYTHON,
    threads: 1
    conda:
        "../../envs/report.yaml"
    shell:
        "PYTHONPATH={params.src:q} {params.python:q} -m dlbench aggregate {input:q}"
        " --parquet {output.parquet:q} --csv {output.csv:q} > {log:q} 2>&1"
