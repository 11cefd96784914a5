# The ceiling of the report's efficiency section: a short GEMM benchmark (PyTorch, square
# matrices, a second or two) per device, precision and thread count of the matrix's cells.
# Its file is kept like the reference weights: measured once, read by every later report.
# It holds the device's lock while it multiplies, as a timing cell does (and asks for
# cpu_timing or the GPU, and the cells' SLURM resources, like one).


rule peak:
    output:
        "results/peak/{device}_{precision}_t{threads}.json",
    log:
        "logs/peak/{device}_{precision}_t{threads}.log",
    wildcard_constraints:
        device=peak_constraint(0),
        precision=peak_constraint(1),
        threads=str(MEASUREMENT["threads"]),
    params:
        src=SRC,
        python=PYTHON,
    threads: cell_threads
    resources:
        # As a measuring cell's: the device, and on SLURM the cells' partition, node type,
        # GPU model and whole node (common.smk), so that the peak is the cells' machine's.
        gpu=cell_gpus,
        cpu_timing=cell_cpu_timing,
        **CELL_CLUSTER_RESOURCES,
    conda:
        "../../envs/pytorch.yaml"
    shell:
        "PYTHONPATH={params.src:q} {params.python:q} -m dlbench peak"
        " --device={wildcards.device} --precision={wildcards.precision}"
        " --threads={wildcards.threads} --out={output:q} > {log:q} 2>&1"
