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

from dlbench.axes import FRAMEWORK_LABELS

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

    @property
    def suffix(self) -> str:
        return "" if self.name == "fp32" else f"-{self.name}"


PRECISIONS = MappingProxyType(
    {
        p.name: p
        for p in (
            Precision("fp32", "float32 throughout", 1e-4),
            Precision(
                "bf16",
                "bfloat16 compute: torch.autocast in PyTorch, the mixed_bfloat16 Keras policy "
                "in TensorFlow (weights stay float32)",
                5e-2,
            ),
            Precision(
                "fp16",
                "float16 compute: torch.autocast in PyTorch, the mixed_float16 Keras policy "
                "in TensorFlow (weights stay float32)",
                2e-2,
            ),
        )
    }
)


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
    precisions: tuple[str, ...] = ("fp32", "bf16", "fp16")
    # Multiplies the output by this factor: a deliberately wrong answer (tests only).
    perturb: float | None = None


_PYTORCH = frozenset({"pytorch"})
_TENSORFLOW = frozenset({"tensorflow"})
_BOTH = _PYTORCH | _TENSORFLOW

RECIPES = {
    r.name: r
    for r in (
        Recipe("eager", _BOTH, "the framework's default, op by op"),
        Recipe(
            "torchscript", _PYTORCH,
            "torch.jit.trace of the model (as in the 2019 transformers benchmark)",
        ),
        Recipe("compile", _PYTORCH, "torch.compile, default mode (Inductor)", "default"),
        Recipe(
            "compile-max-autotune", _PYTORCH,
            "torch.compile, mode max-autotune (benchmarks kernel choices while compiling)",
            "max-autotune",
        ),
        Recipe(
            "compile-reduce-overhead", _PYTORCH,
            "torch.compile, mode reduce-overhead: CUDA graphs replay the whole forward pass",
            "reduce-overhead",
            gpu_only="CUDA graphs (torch.compile mode reduce-overhead) need a GPU",
        ),
        Recipe("graph", _TENSORFLOW, "tf.function graph execution"),
        Recipe("xla", _TENSORFLOW, "tf.function with jit_compile=True (XLA)"),
    )
}
if os.environ.get(TEST_RECIPES_VARIABLE) == "1":
    RECIPES["planted-error"] = Recipe(
        "planted-error", _BOTH, "eager with its output scaled by 1.01 (tests the check)",
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
            others = ", ".join(FRAMEWORK_LABELS[f] for f in sorted(self.frameworks))
            return (
                f"optimization '{self.name}' does not exist in "
                f"{FRAMEWORK_LABELS[framework]} (only in {others})"
            )
        if self.recipe.gpu_only and device != "gpu":
            return f"optimization '{self.name}': {self.recipe.gpu_only}"
        return None

    def describe(self) -> dict:
        """The recipe's parameters, as recorded in every result."""
        return {
            "recipe": self.recipe.name,
            "precision": self.precision.name,
            "compile_mode": self.recipe.compile_mode,
        }


OPTIMIZATIONS = MappingProxyType(
    {
        f"{recipe.name}{PRECISIONS[p].suffix}": Optimization(
            f"{recipe.name}{PRECISIONS[p].suffix}", recipe, PRECISIONS[p]
        )
        for recipe in RECIPES.values()
        for p in recipe.precisions
    }
)
