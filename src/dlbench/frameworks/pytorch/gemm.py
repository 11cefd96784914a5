"""PyTorch's matrix products for the machine's peak (dlbench.measure.peak): one square product per
call, through the library a PyTorch program reaches.

- `torch.matmul`: the default path of every eager layer (aten::mm/addmm → MKL's sgemm in
  the x86 CPU builds, cuBLAS on a GPU). With ONEDNN_VERBOSE=1 it runs no oneDNN primitive
  for float32 on the CPU: it is not oneDNN.
- `torch-onednn`: oneDNN through PyTorch, `torch._C._nn.mkldnn_linear` on oneDNN-layout
  tensors (oneDNN's inner_product primitive, brgemm kernels: ONEDNN_VERBOSE=1 shows one
  primitive per product), the path of frozen TorchScript and of torch.compile's packed
  linear layers. CPU only.
"""

from collections.abc import Callable

import torch

_DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}


def dtype_name(precision: str) -> str:
    return str(_DTYPES.get(precision, torch.float32)).removeprefix("torch.")


def product(backend, library: str, precision: str, n: int) -> Callable[[], object]:
    """A function computing one n×n by n×n product in `precision` on the backend's device,
    its operands made once from a fixed seed."""
    dtype = _DTYPES.get(precision, torch.float32)
    generator = torch.Generator().manual_seed(0)
    a, b = (torch.randn(n, n, generator=generator).to(backend.device, dtype) for _ in "ab")
    if library == "torch-matmul":
        out = torch.empty(n, n, dtype=dtype, device=backend.device)
        return lambda: torch.matmul(a, b, out=out)
    if library == "torch-onednn":
        # linear computes a·wᵀ: the same n³ multiply-adds as a·b.
        a, w = a.to_mkldnn(), b.to_mkldnn()
        return lambda: torch._C._nn.mkldnn_linear(a, w)
    raise ValueError(f"PyTorch has no GEMM library {library!r}")
