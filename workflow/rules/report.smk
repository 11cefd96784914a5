# The summary → papermill runs the report notebook → HTML without code cells.


rule report:
    input:
        summary="results/summary.parquet",
        notebook=workflow.source_path("../notebooks/report.py"),
    output:
        "report/report.html",
    log:
        notebook="logs/report.ipynb",
        log="logs/report.log",
    params:
        notebook_input="logs/report.input.ipynb",
        python=PYTHON,
    threads: 1
    conda:
        "../../envs/report.yaml"
    shell:
        "({params.python:q} -m jupytext --to ipynb -o {params.notebook_input:q} {input.notebook:q}"
        " && {params.python:q} -m papermill -k python3 --cwd . -p summary {input.summary:q}"
        " {params.notebook_input:q} {log.notebook:q}"
        " && {params.python:q} -m nbconvert --to html --no-input --output-dir $(dirname {output:q})"
        " --output $(basename {output:q}) {log.notebook:q}) > {log.log:q} 2>&1"
