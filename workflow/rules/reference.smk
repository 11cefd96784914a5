# The correctness check's shared inputs, made once and read by every cell that applies:
# the seeded weights of each model (safetensors, loaded by every framework, without torch
# outside PyTorch) and the reference output of each (model, batch, length): the reference
# framework's (dlbench.frameworks.registry: PyTorch) eager in fp32 on the CPU, in its
# environment; for generation, the ids it generates greedily per (model, batch, prompt
# length, new tokens). Both jobs hold the CPU's device lock while they compute, so that they
# never overlap a timing cell (and ask for cpu_timing, as timing cells do).


rule reference_weights:
    output:
        paths.weights("{model}"),
    log:
        paths.weights_log("{model}"),
    wildcard_constraints:
        model=reference_constraint("model"),
    params:
        src=SRC,
        python=PYTHON,
        seed=MEASUREMENT["seed"],
    threads: MEASUREMENT["threads"]
    resources:
        cpu_timing=1,
        mem_mb=reference_mem_mb,
    conda:
        framework_env(frameworks.REFERENCE_FRAMEWORK)
    shell:
        "PYTHONPATH={params.src:q} {params.python:q} -m dlbench.reference weights"
        " --model={wildcards.model} --seed={params.seed} --threads={threads}"
        " --out={output:q} > {log:q} 2>&1"


# Every reference output and generated-ids reference of the run, in one job: the
# reference framework imported once and each model built once (dlbench.reference outputs).
if REFERENCE_CASES:

    rule references:
        input:
            weights=REFERENCE_WEIGHTS,
        output:
            REFERENCE_FILES,
        log:
            paths.REFERENCES_LOG,
        params:
            src=SRC,
            python=PYTHON,
            seed=MEASUREMENT["seed"],
            cases=REFERENCE_CASES,
        threads: MEASUREMENT["threads"]
        resources:
            cpu_timing=1,
            mem_mb=references_mem_mb,
        conda:
            framework_env(frameworks.REFERENCE_FRAMEWORK)
        shell:
            "PYTHONPATH={params.src:q} {params.python:q} -m dlbench.reference outputs"
            " {params.cases} --seed={params.seed} --threads={threads} > {log:q} 2>&1"
