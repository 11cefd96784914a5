"""PyTorch's recipes, declared for dlbench.catalogue.recipes (implemented in the scenario
modules beside this one). A light module: it imports no framework."""

from dlbench.catalogue.recipes import (
    EAGER_INFERENCE,
    EAGER_TRAINING,
    GENERATION,
    INFERENCE,
    TRAINING,
    Recipe,
)

# Inductor's recommended settings for CPU inference: weights frozen into constants, which
# lets it constant-fold them and prepack them for oneDNN, and which its CPU GEMM templates
# (what max-autotune chooses among on a CPU) require.
_INDUCTOR_CPU = (("freezing", True),)
# Protocol 2 (dlbench after v1): every recipe skips an all-ones attention mask as eager
# PyTorch does (trace and compile applied it), and compile freezes weights on the CPU.
_SAME_ATTENTION = 2

RECIPES = (
    # -- inference ---------------------------------------------------------------------------
    EAGER_INFERENCE,
    Recipe("torchscript",
           "torch.jit.trace of the model (as in the 2019 transformers benchmark)", INFERENCE,
           compiled=True, protocol=_SAME_ATTENTION),
    # The products of every linear layer through oneDNN, PyTorch's other CPU library: in
    # the x86 builds nn.Linear calls MKL's sgemm, which on an AMD EPYC with full 512-bit
    # units (Zen 5) reached 208 GFLOP/s against oneDNN's 454 through PyTorch; BERT base
    # eager ran 1.8-2.2x as fast this way there, the output within 9e-7 (2026-12-02,
    # docs/measurements.md). Op by op otherwise: an eager recipe.
    Recipe("onednn", "PyTorch eager with every linear layer's product through oneDNN "
           "(torch.utils.mkldnn's MkldnnLinear) instead of MKL's sgemm", INFERENCE,
           precisions=("fp32",), gemm_library="torch-onednn",
           cpu_only="oneDNN's linear layers run on the CPU (on a GPU cuBLAS does them)"),
    Recipe("compile",
           "torch.compile, default mode (Inductor; on the CPU with frozen weights)", INFERENCE,
           compiled=True, protocol=_SAME_ATTENTION, compile_mode="default",
           inductor_cpu=_INDUCTOR_CPU),
    Recipe("compile-max-autotune",
           "torch.compile, mode max-autotune: benchmarks kernel choices while compiling "
           "(on the CPU with frozen weights, which its GEMM templates need; on a GPU it "
           "also replays CUDA graphs, as reduce-overhead does)", INFERENCE,
           compiled=True, protocol=_SAME_ATTENTION, compile_mode="max-autotune",
           gpu_graph_warmup=2, inductor_cpu=_INDUCTOR_CPU),
    Recipe("compile-reduce-overhead",
           "torch.compile, mode reduce-overhead: CUDA graphs replay the whole forward pass",
           INFERENCE, compiled=True, protocol=_SAME_ATTENTION, compile_mode="reduce-overhead",
           gpu_only="CUDA graphs (torch.compile mode reduce-overhead) need a GPU",
           gpu_graph_warmup=2),
    # SDPA (torch.nn.functional.scaled_dot_product_attention, fused) in place of the
    # explicit attention that every framework runs by default (measurement.attention):
    # what SDPA pays shows in their speed-ups over eager; the answer compares the same
    # attention in every framework (dlbench.analysis.attention.same_attention).
    Recipe("eager-sdpa", "PyTorch eager with SDPA, transformers' fused attention",
           INFERENCE, protocol=_SAME_ATTENTION, attention="sdpa"),
    Recipe("torchscript-sdpa", "torch.jit.trace of the model with SDPA", INFERENCE,
           compiled=True, protocol=_SAME_ATTENTION, attention="sdpa"),
    Recipe("compile-sdpa", "torch.compile, default mode, with SDPA (Inductor; on the CPU "
           "with frozen weights)", INFERENCE, compiled=True, protocol=_SAME_ATTENTION,
           compile_mode="default", inductor_cpu=_INDUCTOR_CPU, attention="sdpa"),
    # -- training (the CNN's and a transformer's step) ---------------------------------------
    EAGER_TRAINING,
    Recipe("channels-last", "model and batches in channels_last (NHWC) memory format",
           TRAINING, convolutions_only=True),
    Recipe("compile", "torch.compile of the model (forward and backward); the optimizer "
           "step stays eager", TRAINING, compiled=True),
    Recipe("compile-step", "torch.compile of the whole training step: forward, loss, "
           "backward and optimizer step", TRAINING, compiled=True),
    Recipe("cudnn-benchmark", "torch.backends.cudnn.benchmark: cuDNN times its convolution "
           "algorithms and keeps the fastest", TRAINING,
           gpu_only="cudnn.benchmark tunes cuDNN, which only a GPU has",
           convolutions_only=True),
    Recipe("foreach", "the optimizer's multi-tensor (foreach) implementation", TRAINING),
    Recipe("fused", "the optimizer's fused implementation (one kernel for the whole update)",
           TRAINING),
    # -- generation (greedy decoding; bf16: the model's weights in bfloat16) -----------------
    # Protocol 2: the first token timed as generate's first step on its own, alike in every
    # framework (before, from the steps' stamps inside generate).
    Recipe("eager", "generate() op by op with the dynamic (growing) key-value cache",
           GENERATION, protocol=2),
    Recipe("static-cache", "generate() with a static (preallocated) key-value cache, not "
           "compiled", GENERATION, protocol=2),
    Recipe("compile", "static key-value cache and torch.compile of the model's forward (the "
           "decoding step), as transformers' docs recommend", GENERATION, compiled=True,
           compile_mode="default", protocol=2),
    # The same with SDPA in place of the explicit attention (see inference's).
    Recipe("eager-sdpa", "generate() op by op with the dynamic key-value cache and SDPA",
           GENERATION, attention="sdpa", protocol=2),
    Recipe("static-cache-sdpa", "generate() with a static key-value cache and SDPA, not "
           "compiled", GENERATION, attention="sdpa", protocol=2),
    Recipe("compile-sdpa", "static key-value cache and torch.compile of the model's forward, "
           "with SDPA", GENERATION, compiled=True, compile_mode="default", attention="sdpa",
           protocol=2),
)
