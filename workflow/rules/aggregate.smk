# All cells of the matrix → one tidy table (each result validated against its schema).


rule aggregate:
    input:
        results=[cell.result_path for cell in CELLS.values()],
        logs=report(measuring_logs, category="Logs of the measuring jobs"),
    output:
        parquet=paths.SUMMARY_PARQUET,
        csv=report(
            paths.SUMMARY_CSV,
            category="Summary",
            caption="../report/summary.rst",
        ),
        provenance=paths.PROVENANCE,
    log:
        paths.AGGREGATE_LOG,
    params:
        src=SRC,
        python=PYTHON,
        # What re-running the matrix takes (the report's Reproduce section).
        config=json.dumps(config, sort_keys=True, default=str),
        configfiles=[str(f) for f in workflow.configfiles],
        # Cells from another machine or dlbench version: compared only if the config says.
        mix="--mix-foreign" if SETTINGS["report"]["mix_foreign"] else "",
    threads: 1
    conda:
        "../../envs/report.yaml"
    shell:
        "PYTHONPATH={params.src:q} {params.python:q} -m dlbench aggregate {input.results:q}"
        " --parquet {output.parquet:q} --csv {output.csv:q} --provenance {output.provenance:q}"
        " --config {params.config:q} --configfiles {params.configfiles:q} {params.mix}"
        " > {log:q} 2>&1"
