# The summary → papermill runs the report notebook → HTML without code cells.


rule report:
    input:
        summary="results/summary.parquet",
        notebook=workflow.source_path("../notebooks/report.py"),
    output:
        report("report/report.html", category="Report", caption="../report/report.rst"),
    log:
        notebook="logs/report.ipynb",
        log="logs/report.log",
    params:
        src=SRC,
        python=PYTHON,
    threads: 1
    conda:
        "../../envs/report.yaml"
    shell:
        "PYTHONPATH={params.src:q} {params.python:q} -m dlbench report"
        " --notebook {input.notebook:q} --summary {input.summary:q}"
        " --executed {log.notebook:q} --out {output:q} > {log.log:q} 2>&1"


onerror:
    report_after_failure()
