"""ONNX Runtime, as the harness knows it without importing onnxruntime."""

from types import MappingProxyType

from dlbench.catalogue.frameworks import Framework, GemmLibrary

FRAMEWORK = Framework(
    name="onnxruntime",
    label="ONNX Runtime",
    color="tab:purple",
    environment="envs/onnxruntime.yaml",
    # onnx and onnxscript: torch.onnx's exporter, which writes the model it runs (export.py).
    distributions=("onnxruntime", "onnx", "onnxscript"),
    # The PyTorch class whose ONNX export it runs (torch.onnx.export of transformers 4.57's
    # model, the reference weights loaded).
    model_classes=MappingProxyType({
        "bert": "BertModel",
        "distilbert": "DistilBertModel",
        "gpt2": "GPT2Model",
        "roberta": "RobertaModel",
        "xlm": "XLMModel",
    }),
    no_family=MappingProxyType({
        "xlnet": "torch 2.13's ONNX exporter fails on transformers' XLNetModel (\"Cannot "
                 "find a compatible OpOverload for aten.sub\", 2026-11-29)",
    }),
    # A runtime for trained models: it neither trains nor generates here.
    scenarios=("inference",),
    gemm_libraries=(
        GemmLibrary("ort-matmul", "ONNX Runtime MatMul (CPU execution provider: MLAS)",
                    ("cpu",), True),
    ),
    default_inference="ort-all",  # InferenceSession's default level
    no_pinned_memory="ONNX Runtime has no input pipeline",
    gpu_timing="never on a GPU: the onnxruntime wheel of this environment has the CPU "
               "execution provider only (the CUDA one is the onnxruntime-gpu package), and "
               "its GPU cells are unsupported with that reason",
    gpu_memory="none (no GPU cells)",
    mixed_precision="-fp16 converts the exported graph to float16 with ONNX Runtime's own "
                    "converter (onnxruntime.transformers.float16: weights and operators in "
                    "float16 but those it keeps in float32, with casts around them; float32 "
                    "inputs and outputs); the ops listed are the converted graph's operators "
                    "by the type of their outputs; it has no bfloat16",
    no_warm_parent="not yet measured against jobs that import it (bench/warm_parent.py)",
)
