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
    # model, the reference weights loaded). XLNet's export fails in torch 2.13's exporter
    # ("Cannot find a compatible OpOverload for aten.sub", 2026-11-29).
    model_classes=MappingProxyType({
        "bert": "BertModel",
        "distilbert": "DistilBertModel",
        "gpt2": "GPT2Model",
        "roberta": "RobertaModel",
        "xlm": "XLMModel",
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
    mixed_precision="none: every recipe runs the exported float32 graph (the backend says "
                    "why a reduced precision is unsupported)",
)
