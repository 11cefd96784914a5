# dlbench: one JSON per benchmark cell → summary table → HTML report.
# The matrix and measurement settings come from config/config.yaml (see config/README.md).
import sys
from pathlib import Path

from snakemake.utils import min_version

min_version("9.0")


configfile: "config/config.yaml"


# `--config` values arrive as strings: read them as YAML, like a config file's.
sys.path.insert(0, str(Path(workflow.basedir) / "src"))
from dlbench.config import type_command_line

type_command_line(config, workflow.config_settings.overwrite_config)


include: "workflow/rules/common.smk"
include: "workflow/rules/reference.smk"
include: "workflow/rules/run.smk"
include: "workflow/rules/aggregate.smk"
include: "workflow/rules/report.smk"


rule all:
    input:
        "report/report.html",
    default_target: True
