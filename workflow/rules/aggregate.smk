# All cells of the matrix → one tidy table (each result validated against its schema).


rule aggregate:
    input:
        results=[cell.result_path for cell in CELLS.values()],
        logs=report(measuring_logs, category="Logs of the measuring jobs"),
    output:
        parquet="results/summary.parquet",
        csv=report(
            "results/summary.csv",
            category="Summary",
            caption="../report/summary.rst",
        ),
    log:
        "logs/aggregate.log",
    params:
        src=SRC,
        python=PYTHON,
    threads: 1
    conda:
        "../../envs/report.yaml"
    shell:
        "PYTHONPATH={params.src:q} {params.python:q} -m dlbench aggregate {input.results:q}"
        " --parquet {output.parquet:q} --csv {output.csv:q} > {log:q} 2>&1"
