# The training data sets: built once as PNG files in class folders with a manifest, read by
# every training cell through its framework's own input pipeline. Like the reference rules,
# the job holds the CPU's device lock while it writes, so it never overlaps a timing cell.
# A damaged set is moved aside when the workflow starts, so that this rule builds it again
# (common.smk, move_damaged_datasets_aside).


rule dataset:
    output:
        directory(paths.dataset("{dataset}")),
    log:
        paths.dataset_log("{dataset}"),
    wildcard_constraints:
        dataset=alternatives(DATASETS) or "^$",
    params:
        args=dataset_args,
        src=SRC,
        python=PYTHON,
    threads: 1
    resources:
        cpu_timing=1,
    conda:
        "../../envs/data.yaml"
    shell:
        "PYTHONPATH={params.src:q} {params.python:q} -m dlbench.data --dataset={wildcards.dataset}"
        " --out={output:q} {params.args} > {log:q} 2>&1"
