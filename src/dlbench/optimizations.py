"""Optimizations: every recipe and precision declared once here, combined by name.

An optimization is a base recipe (how the forward pass is executed: eager, traced,
compiled, a graph, XLA), optionally followed by a reduced precision: `compile-bf16` is the
recipe `compile` in the precision `bf16`. Each framework backend implements the base
recipes listed with its framework (`recipes` in dlbench.frameworks.<name>) and the
precisions once for all of them, so no combination needs code of its own.

What is known without running a cell (the other framework's recipe, CUDA graphs off a
GPU) is a reason here; what only the device can say (does this CPU have native bf16?)
is the backend's `optimization_problem`.
"""

import os
from dataclasses import dataclass
from types import MappingProxyType

from dlbench.axes import other_framework_reason

# The planted-error recipe (a test of the correctness check) exists only where this
# variable is 1: no config can reach it otherwise.
TEST_RECIPES_VARIABLE = "DLBENCH_TEST_RECIPES"


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
                "float32 throughout, float32 matrix products too (TF32 is switched off in both "
                "frameworks: TensorFlow would use it on Ampere or newer GPUs by default)",
                1e-4,
            ),
            Precision(
                "tf32",
                "float32 storage and arithmetic, but GPU tensor cores round the inputs of "
                "float32 matrix products to TF32 (10-bit mantissa): fp32_precision 'tf32' in "
                "PyTorch, enable_tensor_float_32_execution in TensorFlow; NVIDIA GPUs of "
                "compute capability 8.0 or newer only",
                # Emulated on a CPU, BERT base reached 5.6e-4: ten times that.
                5e-3,
                gpu_only="TF32 is a tensor-core format of NVIDIA GPUs (compute capability 8.0 "
                         "or newer): a CPU computes float32 matrix products in float32",
            ),
            Precision(
                "bf16",
                "bfloat16 compute: torch.autocast in PyTorch, the mixed_bfloat16 Keras policy "
                "in TensorFlow (weights stay float32; which ops stay in float32 differs "
                "between the two, and is recorded per cell)",
                5e-2,
            ),
            Precision(
                "fp16",
                "float16 compute: torch.autocast in PyTorch, the mixed_float16 Keras policy "
                "in TensorFlow (weights stay float32; which ops stay in float32 differs "
                "between the two, and is recorded per cell)",
                2e-2,
            ),
        )
    }
)
# The precisions that compute in a reduced floating-point type under a mixed-precision
# mode (autocast, a Keras policy), as opposed to float32 storage with float32 or TF32
# matrix products.
MIXED = ("bf16", "fp16")


@dataclass(frozen=True)
class Recipe:
    """A way to execute the forward pass, before any precision is applied."""

    name: str
    frameworks: frozenset[str]
    description: str
    # torch.compile's mode, for the compile recipes.
    compile_mode: str | None = None
    # Why the recipe needs a GPU, if it does.
    gpu_only: str | None = None
    precisions: tuple[str, ...] = ("fp32", "tf32", "bf16", "fp16")
    # Multiplies the output by this factor: a deliberately wrong answer (tests only).
    perturb: float | None = None
    # On a GPU the recipe records CUDA graphs: the call after the first records them, so
    # this many warm-up calls run whatever measurement.warmup_iterations says, and the
    # recording never lands in the timed loop.
    gpu_graph_warmup: int = 0
    # Inductor options of the compile recipes on the CPU (torch._inductor.config).
    inductor_cpu: tuple[tuple[str, object], ...] = ()
    # The protocol this recipe is measured with: raised whenever what it measures changes,
    # so that a workflow measures its cells again instead of reusing older results.
    protocol: int = 1
    # The forward pass runs as one captured program (a trace, a graph, Inductor, XLA)
    # rather than op by op: a comparison is like for like when both sides had one.
    compiled: bool = False

    @property
    def kind(self) -> str:
        """'compiled' or 'eager' (see `compiled`)."""
        return COMPILED if self.compiled else EAGER

    def min_warmup(self, device: str) -> int:
        """The fewest warm-up calls on this device (CUDA graphs record on a GPU)."""
        return self.gpu_graph_warmup if device == "gpu" else 0


# The two kinds of recipe (Recipe.kind).
EAGER, COMPILED = "eager", "compiled"
_PYTORCH = frozenset({"pytorch"})
_TENSORFLOW = frozenset({"tensorflow"})
_BOTH = _PYTORCH | _TENSORFLOW
_JAX = frozenset({"jax"})
_ALL = _BOTH | _JAX

# Inductor's recommended settings for CPU inference: weights frozen into constants, which
# lets it constant-fold them and prepack them for oneDNN, and which its CPU GEMM templates
# (what max-autotune chooses among on a CPU) require.
_INDUCTOR_CPU = (("freezing", True),)
# Protocol 2 (dlbench after v1): every recipe skips an all-ones attention mask as eager
# PyTorch does (trace and compile applied it), and compile freezes weights on the CPU.
_SAME_ATTENTION = 2

RECIPES = {
    r.name: r
    for r in (
        Recipe("eager", _ALL, "the framework's default, op by op"),
        Recipe(
            "torchscript", _PYTORCH,
            "torch.jit.trace of the model (as in the 2019 transformers benchmark)",
            protocol=_SAME_ATTENTION, compiled=True,
        ),
        Recipe("compile", _PYTORCH,
               "torch.compile, default mode (Inductor; on the CPU with frozen weights)",
               "default", inductor_cpu=_INDUCTOR_CPU, protocol=_SAME_ATTENTION, compiled=True),
        Recipe(
            "compile-max-autotune", _PYTORCH,
            "torch.compile, mode max-autotune: benchmarks kernel choices while compiling "
            "(on the CPU with frozen weights, which its GEMM templates need; on a GPU it "
            "also replays CUDA graphs, as reduce-overhead does)",
            "max-autotune", gpu_graph_warmup=2, inductor_cpu=_INDUCTOR_CPU,
            protocol=_SAME_ATTENTION, compiled=True,
        ),
        Recipe(
            "compile-reduce-overhead", _PYTORCH,
            "torch.compile, mode reduce-overhead: CUDA graphs replay the whole forward pass",
            "reduce-overhead",
            gpu_only="CUDA graphs (torch.compile mode reduce-overhead) need a GPU",
            gpu_graph_warmup=2, protocol=_SAME_ATTENTION, compiled=True,
        ),
        Recipe("graph", _TENSORFLOW, "tf.function graph execution", compiled=True),
        Recipe("xla", _TENSORFLOW, "tf.function with jit_compile=True (XLA)", compiled=True),
        Recipe("jit", _JAX,
               "jax.jit of the Flax model's forward pass, weights as arguments: XLA compiles "
               "it whole at the first call (bf16/fp16: the Flax modules' computation dtype, "
               "weights float32)", compiled=True),
    )
}
if os.environ.get(TEST_RECIPES_VARIABLE) == "1":
    RECIPES["planted-error"] = Recipe(
        "planted-error", _ALL, "eager with its output scaled by 1.01 (tests the check)",
        precisions=("fp32",), perturb=1.01,
    )
RECIPES = MappingProxyType(RECIPES)


@dataclass(frozen=True)
class Optimization:
    """A recipe in a precision, named `<recipe>` (fp32) or `<recipe>-<precision>`."""

    name: str
    recipe: Recipe
    precision: Precision

    @property
    def frameworks(self) -> frozenset[str]:
        return self.recipe.frameworks

    @property
    def description(self) -> str:
        if self.precision.name == "fp32":
            return self.recipe.description
        return f"{self.recipe.description}, in {self.precision.name}"

    def unsupported_reason(self, framework: str, device: str) -> str | None:
        """Why this optimization cannot apply to the framework and device (None if it can)."""
        if framework not in self.frameworks:
            return other_framework_reason(self.name, framework, self.frameworks)
        if device != "gpu":
            for why in (self.recipe.gpu_only, self.precision.gpu_only):
                if why:
                    return f"optimization '{self.name}': {why}"
        return None

    def describe(self, device: str | None = None) -> dict:
        """The recipe's parameters, as recorded in every result."""
        described = {
            "recipe": self.recipe.name,
            "precision": self.precision.name,
            "compile_mode": self.recipe.compile_mode,
        }
        if device == "cpu" and self.recipe.inductor_cpu:
            described["inductor"] = dict(self.recipe.inductor_cpu)
        return described


OPTIMIZATIONS = MappingProxyType(
    {
        f"{recipe.name}{PRECISIONS[p].suffix}": Optimization(
            f"{recipe.name}{PRECISIONS[p].suffix}", recipe, PRECISIONS[p]
        )
        for recipe in RECIPES.values()
        for p in recipe.precisions
    }
)


def precision_of(optimization, recorded) -> str | None:
    """The precision a cell's result records, else the suffix of its optimization's name."""
    if isinstance(recorded, str) and recorded in PRECISIONS:
        return recorded
    if not isinstance(optimization, str):
        return None
    suffix = optimization.rsplit("-", 1)[-1]
    return suffix if suffix in PRECISIONS and suffix != "fp32" else "fp32"
