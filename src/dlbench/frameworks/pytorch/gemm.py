"""PyTorch's matrix products for the machine's peak (dlbench.run.peak): one square product per
call, through the library a PyTorch program reaches.

- `torch-linear`: `torch.nn.functional.linear`, what every `nn.Linear` calls, eagerly and
  in a TorchScript trace (aten::linear → addmm of the transposed weight → MKL's sgemm in
  the x86 CPU builds: MKL_VERBOSE=1 shows SGEMM(T,N) for each layer and for this product;
  cuBLAS on a GPU). With ONEDNN_VERBOSE=1 it runs no oneDNN primitive for float32 on the
  CPU: it is not oneDNN.
- `torch-onednn`: oneDNN through PyTorch, `torch._C._nn.mkldnn_linear` on oneDNN-layout
  tensors (oneDNN's inner_product primitive, brgemm kernels: ONEDNN_VERBOSE=1 shows one
  primitive per product): another library the machine offers PyTorch programs, not the
  path of dlbench's float32 cells (eager, traced and compiled alike run MKL: with
  torch.compile's frozen weights, MKL's packed sgemm, SGEMM_COMPUTE(P,N)). CPU only.
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
    if library == "torch-linear":
        # linear computes a·bᵀ, as a layer multiplies its inputs by its weight matrix.
        return lambda: torch.nn.functional.linear(a, b)
    if library == "torch-onednn":
        # linear computes a·wᵀ: the same n³ multiply-adds as a·b.
        a, w = a.to_mkldnn(), b.to_mkldnn()
        return lambda: torch._C._nn.mkldnn_linear(a, w)
    raise ValueError(f"PyTorch has no GEMM library {library!r}")
