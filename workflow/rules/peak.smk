# The ceiling of the report's efficiency section, per device, precision and thread count of
# the matrix's cells: the matrix product of every library the matrix's frameworks use
# (dlbench.run.peak.LIBRARIES), each measured by a job of its own in its framework's
# environment (peak_library), then joined into one record that names the best (peak).
# Its files are kept like the reference weights: measured once, read by every later report.
# A library job holds the device's lock while it multiplies, as a timing cell does (and
# asks for cpu_timing or the GPU, and the cells' SLURM resources, like one); on the CPU it
# first waits for a quiet machine (measurement.quiet_wait_s) and measures again a library
# that did not get its cores (dlbench.run.peak).
from dlbench.run.peak import LIBRARIES, library_paths

localrules:
    peak,


# Per device, the frameworks of the cells that run on it: their libraries are measured.
PEAK_FRAMEWORKS = {
    device: {cell.framework for cell in CELLS.values()
             if cell.device == device and cell.unsupported_reason() is None}
    for device, _ in PEAK_KEYS
}


rule peak_library:
    output:
        # The paths are dlbench.files.paths', with the wildcards in them.
        paths.peak_library("{device}", "{precision}", "{threads}", "{library}"),
    log:
        paths.peak_library_log("{device}", "{precision}", "{threads}", "{library}"),
    wildcard_constraints:
        device=peak_constraint(0),
        precision=peak_constraint(1),
        threads=str(MEASUREMENT["threads"]),
        library=alternatives(LIBRARIES),
    params:
        src=SRC,
        python=PYTHON,
        quiet=MEASUREMENT["quiet_wait_s"],
    threads: cell_threads
    resources:
        # As a measuring cell's: the device, and on SLURM the cells' partition, node type,
        # GPU model and whole node (common.smk), so that the peak is the cells' machine's.
        gpu=cell_gpus,
        cpu_timing=cell_cpu_timing,
        **CELL_CLUSTER_RESOURCES,
    conda:
        lambda w: framework_env(LIBRARIES[w.library].framework)
    shell:
        "PYTHONPATH={params.src:q} {params.python:q} -m dlbench peak"
        " --device={wildcards.device} --precision={wildcards.precision}"
        " --threads={wildcards.threads} --library={wildcards.library}"
        " --quiet-wait-s={params.quiet} --out={output:q} > {log:q} 2>&1"


rule peak:
    input:
        lambda w: library_paths(w.device, w.precision, w.threads, PEAK_FRAMEWORKS[w.device]),
    output:
        paths.peak("{device}", "{precision}", "{threads}"),
    log:
        paths.peak_log("{device}", "{precision}", "{threads}"),
    wildcard_constraints:
        device=peak_constraint(0),
        precision=peak_constraint(1),
        threads=str(MEASUREMENT["threads"]),
    params:
        src=SRC,
        python=PYTHON,
    threads: 1
    conda:
        "../../envs/report.yaml"
    shell:
        "PYTHONPATH={params.src:q} {params.python:q} -m dlbench peak"
        " --device={wildcards.device} --precision={wildcards.precision}"
        " --threads={wildcards.threads} --combine {input:q}"
        " --out={output:q} > {log:q} 2>&1"
