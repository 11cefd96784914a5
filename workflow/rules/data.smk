# The training data sets: built once as PNG files in class folders with a manifest, read by
# every training cell through its framework's own input pipeline. Like the reference rules,
# the job holds the CPU's device lock while it writes, so it never overlaps a timing cell.


# Snakemake does not look inside an existing output folder: a data set that the matrix
# reads and that no longer matches its manifest (a file missing or of another size, the
# manifest edited or unreadable: dlbench.data.folder_damage, which reads no image) is moved
# aside, to results/data/.<name>.damaged (kept for a look), so that the dataset rule builds
# it again before the next cell that reads it. Results already there stay: a cell whose
# damaged set made it an `error` is measured again once its result is deleted.
from dlbench.data import folder_damage


def move_damaged_datasets_aside():
    import shutil

    for name in DATASETS:
        folder = Path(paths.dataset(name))
        problems = folder_damage(folder)
        if problems:
            aside = folder.with_name(f".{name}.damaged")
            shutil.rmtree(aside, ignore_errors=True)
            folder.rename(aside)
            more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
            print(f"dlbench: {folder} is damaged, building it again (the damaged one is "
                  f"kept in {aside}): {problems[0]}{more}", file=sys.stderr)


if workflow.is_main_process:  # not again in each cluster job
    move_damaged_datasets_aside()


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
