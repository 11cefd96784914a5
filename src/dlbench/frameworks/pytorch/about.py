"""PyTorch, as the harness knows it without importing torch."""

from types import MappingProxyType

from dlbench.catalogue.frameworks import Framework, GemmLibrary

FRAMEWORK = Framework(
    name="pytorch",
    label="PyTorch",
    color="tab:blue",
    environment="envs/pytorch.yaml",
    distributions=("torch",),
    model_classes=MappingProxyType({
        "bert": "BertModel",
        "distilbert": "DistilBertModel",
        "gpt2": "GPT2Model",
        "roberta": "RobertaModel",
        "xlnet": "XLNetModel",
        "xlm": "XLMModel",
    }),
    # The default is what nn.Linear calls, eagerly, traced and compiled (frozen weights:
    # MKL's packed sgemm): MKL's sgemm on x86 CPUs (MKL_VERBOSE=1), cuBLAS on GPUs; oneDNN
    # through PyTorch is another library a PyTorch program can reach (CPU).
    gemm_libraries=(
        GemmLibrary("torch-linear", "PyTorch F.linear, nn.Linear's product (MKL/cuBLAS)",
                    ("cpu", "gpu"), True),
        GemmLibrary("torch-onednn", "PyTorch → oneDNN (mkldnn_linear)", ("cpu",), False),
    ),
    gpu_timing="on the host and on the device, with CUDA events around the same steps "
               "(device time)",
    gpu_memory="its caching allocator's allocated and reserved peaks "
               "(torch.cuda.max_memory_allocated, max_memory_reserved)",
    mixed_precision="torch.autocast casts each op by its own lists (matrix products to the "
                    "reduced type; some, such as reductions and normalizations, to float32); "
                    "the ops listed are the aten ops of one eager call",
)
