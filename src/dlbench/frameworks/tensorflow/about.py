"""TensorFlow, as the harness knows it without importing tensorflow."""

from types import MappingProxyType

from dlbench.catalogue.frameworks import Framework, GemmLibrary

FRAMEWORK = Framework(
    name="tensorflow",
    label="TensorFlow",
    color="tab:orange",
    environment="envs/tensorflow.yaml",
    # tf-keras: the Keras 2 that transformers' TF classes need on TF ≥ 2.16.
    distributions=("tensorflow", "tf-keras"),
    model_classes=MappingProxyType({
        "bert": "TFBertModel",
        "distilbert": "TFDistilBertModel",
        "gpt2": "TFGPT2Model",
        "roberta": "TFRobertaModel",
        "xlnet": "TFXLNetModel",
        "xlm": "TFXLMModel",
    }),
    # Eigen with oneDNN's kernels (or oneDNN's own ops) on CPUs, cuBLAS on GPUs.
    gemm_libraries=(
        GemmLibrary("tf-matmul", "TensorFlow tf.matmul (tf.function)", ("cpu", "gpu"), True),
    ),
    no_mixed_precision=MappingProxyType({
        "xlnet": "transformers 4.57's TFXLNetModel fails under a mixed-precision Keras policy "
                 "(its relative attention mixes float32 and reduced-precision tensors)",
    }),
    no_pinned_memory="pinned memory is a PyTorch DataLoader option; tf.data has none",
    # On a GPU: float32 without TF32, and memory growth, unlike v1.
    inference_protocol=MappingProxyType({"gpu": 2}),
    # Keras' fit runs the step as a tf.function graph.
    default_step="graph",
    gpu_timing="on the host only, after sync_devices(): TensorFlow's Python API exposes no "
               "device events",
    gpu_memory="its allocator's peak (tf.config.experimental.get_memory_info), with memory "
               "growth on so that NVML does not report the whole card",
    mixed_precision="Keras's mixed-precision policy decides per layer (computations in the "
                    "reduced type, variables in float32, some layers in float32); the ops "
                    "listed are the graph ops of the traced forward pass",
    kernel_per_variable=(
        "legacy-optimizer", "Keras optimizers (2.11 and later) compose TensorFlow ops per "
        "variable too; its single C++ kernel per variable (ResourceApplyAdam) is the legacy "
        "optimizer's"),
    no_warm_parent="forked after TensorFlow's import, its BERT-base cells measured 10% slower "
                   "than in jobs that import it (bench/warm_parent.py, 2026-11-29: warm / cold "
                   "medians 1.100, rounds 1.072-1.193); not yet explained",
)
