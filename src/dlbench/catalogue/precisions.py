"""Precisions: the arithmetic a cell computes in, each declared once with its tolerance.

A recipe (dlbench.catalogue.recipes) combines with the precisions it lists; each framework
implements a precision once for all of its recipes.
"""

from dataclasses import dataclass
from types import MappingProxyType


@dataclass(frozen=True)
class Precision:
    name: str
    description: str
    # The largest accepted max |output − reference| / max |reference| of a cell in this
    # precision; the reference is PyTorch eager in fp32 on the CPU.
    tolerance: float
    # Why the precision exists on GPUs only, if it does.
    gpu_only: str | None = None

    @property
    def suffix(self) -> str:
        return "" if self.name == "fp32" else f"-{self.name}"


PRECISIONS = MappingProxyType(
    {
        p.name: p
        for p in (
            Precision(
                "fp32",
                "float32 throughout, float32 matrix products too (TF32 is switched off in "
                "every framework: TensorFlow and JAX would use it on Ampere or newer GPUs by "
                "default)",
                1e-4,
            ),
            Precision(
                "tf32",
                "float32 storage and arithmetic, but GPU tensor cores round the inputs of "
                "float32 matrix products to TF32 (10-bit mantissa): fp32_precision 'tf32' in "
                "PyTorch, enable_tensor_float_32_execution in TensorFlow, the default matmul "
                "precision 'tensorfloat32' in JAX; NVIDIA GPUs of "
                "compute capability 8.0 or newer only",
                # Emulated on a CPU, BERT base reached 5.6e-4: ten times that.
                5e-3,
                gpu_only="TF32 is a tensor-core format of NVIDIA GPUs (compute capability 8.0 "
                         "or newer): a CPU computes float32 matrix products in float32",
            ),
            Precision(
                "bf16",
                "bfloat16 compute: torch.autocast in PyTorch, the mixed_bfloat16 Keras policy "
                "in TensorFlow, the Flax modules' dtype in JAX (weights stay float32; which "
                "ops stay in float32 differs between frameworks, and is recorded per cell)",
                5e-2,
            ),
            Precision(
                "fp16",
                "float16 compute: torch.autocast in PyTorch, the mixed_float16 Keras policy "
                "in TensorFlow, the Flax modules' dtype in JAX (weights stay float32; which "
                "ops stay in float32 differs between frameworks, and is recorded per cell)",
                2e-2,
            ),
        )
    }
)
# The precisions that compute in a reduced floating-point type under a mixed-precision
# mode (autocast, a Keras policy), as opposed to float32 storage with float32 or TF32
# matrix products.
MIXED = ("bf16", "fp16")
