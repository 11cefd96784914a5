# dlbench: one JSON per benchmark cell → summary table → HTML report.
# The matrix and measurement settings come from config/config.yaml, or from the config files
# given with --configfile instead of it (see config/README.md).
from snakemake.utils import min_version

min_version("9.0")


# A config file given on the command line (a preset, the user's own) replaces the default
# one: merged into it, it would keep the default's scenarios and settings it does not name.
if not workflow.overwrite_configfiles:

    configfile: "config/config.yaml"


# `snakemake --report report/provenance.html`: Snakemake's own view of a run.
report: "workflow/report/workflow.rst"


include: "workflow/rules/common.smk"
include: "workflow/rules/reference.smk"
include: "workflow/rules/peak.smk"
include: "workflow/rules/data.smk"
include: "workflow/rules/run.smk"
include: "workflow/rules/aggregate.smk"
include: "workflow/rules/report.smk"
include: "workflow/rules/compare.smk"


# Every cell's result is a target of its own: Snakemake does not make again a deleted file
# whose consumers (the summary, the report) are up to date, so a result deleted to measure
# its cell again would otherwise be left missing.
rule all:
    input:
        paths.REPORT,
        COMPARE_OUTPUTS,
        [cell.result_path for cell in CELLS.values()],
    default_target: True


# One run at a time on the results folder, from the first job to the last (see
# dlbench.run.runlock); after a failure, the summary and report of everything, failures
# included, and the previous run's where this one could not make them (dlbench.run.keep).
onstart:
    lock_results_folder()
    keep_previous_outputs()


onsuccess:
    drop_previous_outputs()
    unlock_results_folder()
    print_measuring_share()


onerror:
    try:
        report_after_failure()
        put_back_previous_outputs()
    finally:
        unlock_results_folder()
