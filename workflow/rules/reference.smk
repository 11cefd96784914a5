# The correctness check's shared inputs, made once and read by every cell that applies:
# the seeded weights of each model (safetensors, loaded by every framework, without torch
# outside PyTorch) and the reference output of each (model, batch, length): the reference
# framework's (dlbench.catalogue.frameworks: PyTorch) eager in fp32 on the CPU, in its
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


rule reference_output:
    input:
        weights=paths.weights("{model}"),
    output:
        paths.reference_output("{model}", "{batch}", "{seqlen}"),
    log:
        paths.reference_output_log("{model}", "{batch}", "{seqlen}"),
    wildcard_constraints:
        model=reference_constraint("model"),
        batch=reference_constraint("batch"),
        seqlen=reference_constraint("seqlen"),
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
        "PYTHONPATH={params.src:q} {params.python:q} -m dlbench.reference output"
        " --model={wildcards.model} --batch={wildcards.batch} --seqlen={wildcards.seqlen}"
        " --seed={params.seed} --threads={threads} --weights={input.weights:q}"
        " --out={output:q} > {log:q} 2>&1"


rule reference_generation:
    input:
        weights=paths.weights("{model}"),
    output:
        paths.reference_generation("{model}", "{batch}", "{seqlen}", "{new_tokens}"),
    log:
        paths.reference_generation_log("{model}", "{batch}", "{seqlen}", "{new_tokens}"),
    wildcard_constraints:
        model=reference_constraint("model"),
        batch=reference_constraint("batch"),
        seqlen=reference_constraint("seqlen"),
        new_tokens=reference_constraint("new_tokens"),
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
        "PYTHONPATH={params.src:q} {params.python:q} -m dlbench.reference generation"
        " --model={wildcards.model} --batch={wildcards.batch} --seqlen={wildcards.seqlen}"
        " --new-tokens={wildcards.new_tokens} --seed={params.seed} --threads={threads}"
        " --weights={input.weights:q} --out={output:q} > {log:q} 2>&1"
