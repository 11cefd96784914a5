# The summary and the machine's peaks → papermill runs the report notebook (its head, one
# section per scenario, the efficiency section and the tail, see dlbench.report) → HTML
# without code cells.

# Every notebook file is an input: editing the head or any section renders the report again.
REPORT_SECTIONS = sorted(
    path.name for path in (Path(workflow.basedir) / "workflow/notebooks/sections").glob("*.py")
)


rule report:
    input:
        summary=paths.SUMMARY_PARQUET,
        provenance=paths.PROVENANCE,
        notebook=workflow.source_path("../notebooks/report.py"),
        sections=[workflow.source_path(f"../notebooks/sections/{n}") for n in REPORT_SECTIONS],
        # The machine's GEMM peaks of the cells' devices and precisions (peak.smk).
        peaks=PEAKS,
    output:
        report(paths.REPORT, category="Report", caption="../report/report.rst"),
    log:
        notebook=paths.REPORT_NOTEBOOK,
        log=paths.REPORT_LOG,
    params:
        src=SRC,
        python=PYTHON,
    threads: 1
    conda:
        "../../envs/report.yaml"
    shell:
        "PYTHONPATH={params.src:q} {params.python:q} -m dlbench report"
        " --notebook {input.notebook:q} --summary {input.summary:q}"
        " --executed {log.notebook:q} --out {output:q} --peaks {input.peaks:q}"
        " > {log.log:q} 2>&1"
