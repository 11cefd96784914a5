# With `compare.baseline` set: this run's results against the baseline's, as a page and a
# CSV (dlbench compare); without it, no rule and no target. The baseline was measured at
# another time, so its changes count only beyond compare's drift floor (for smaller ones,
# `dlbench compare --interleave` measures both sides alternately).
COMPARE_BASELINE = SETTINGS["compare"]["baseline"]
COMPARE_OUTPUTS = [paths.COMPARE_HTML, paths.COMPARE_CSV] if COMPARE_BASELINE else []

if COMPARE_BASELINE and not Path(COMPARE_BASELINE).exists():
    raise WorkflowError(
        f"compare.baseline: {COMPARE_BASELINE!r} does not exist; give a results folder "
        "(with runs/*.json) or a summary (.parquet or .csv)"
    )

if COMPARE_BASELINE:

    localrules:
        compare,

    rule compare:
        input:
            # This run's cells: the summary names their results/runs/*.json, which keep
            # the per-iteration samples (dlbench.analysis.resultset reads them from there).
            summary=paths.SUMMARY_PARQUET,
            notebook=workflow.source_path("../notebooks/compare.py"),
        output:
            html=report(paths.COMPARE_HTML, category="Report",
                        caption="../report/compare.rst"),
            csv=paths.COMPARE_CSV,
        log:
            notebook=paths.COMPARE_NOTEBOOK,
            log=paths.COMPARE_LOG,
        params:
            src=SRC,
            python=PYTHON,
            baseline=COMPARE_BASELINE,
        threads: 1
        conda:
            "../../envs/report.yaml"
        shell:
            "PYTHONPATH={params.src:q} {params.python:q} -m dlbench compare"
            " {params.baseline:q} {input.summary:q} --csv {output.csv:q} --html {output.html:q}"
            " --notebook {input.notebook:q} --executed {log.notebook:q} > {log.log:q} 2>&1"
