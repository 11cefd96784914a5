"""Training optimizations and optimizers, declared once for every training scenario.

A training optimization is a recipe — one knob turned against the framework's default
(`eager`) — optionally in a reduced precision: `channels-last-bf16` is the recipe
`channels-last` under bf16 autocast. Each framework's training operations implement the
recipes listed with it and the precisions once for all of them. The optimizer (SGD with
momentum, Adam) is an axis of its own, the same in both frameworks.

What is known without running (the other framework's recipe, a GPU-only knob on the CPU)
is a reason here; what depends on the model (channels_last on a model without
convolutions) is the scenario's; what only the device can tell (native bf16?) is the
backend's.
"""

from dataclasses import dataclass
from types import MappingProxyType

from dlbench.axes import other_framework_reason
from dlbench.optimizations import COMPILED, EAGER, PRECISIONS, Precision

_PYTORCH = frozenset({"pytorch"})
_TENSORFLOW = frozenset({"tensorflow"})
_BOTH = _PYTORCH | _TENSORFLOW
_JAX = frozenset({"jax"})


@dataclass(frozen=True)
class TrainingRecipe:
    name: str
    frameworks: frozenset[str]
    description: str
    # Why the recipe needs a GPU, if it does.
    gpu_only: str | None = None
    # The recipe changes the layout of convolutions: meaningless without them.
    convolutions_only: bool = False
    # The step (or the model in it) runs as a compiled program or a graph rather than op by
    # op: a comparison is like for like when both sides had one.
    compiled: bool = False

    @property
    def kind(self) -> str:
        """'compiled' or 'eager' (see `compiled`)."""
        return COMPILED if self.compiled else EAGER


RECIPES = MappingProxyType({
    r.name: r for r in (
        TrainingRecipe("eager", _BOTH, "the framework's default: PyTorch eager in NCHW, "
                       "TensorFlow eager (GradientTape) in NHWC"),
        TrainingRecipe("channels-last", _PYTORCH, "model and batches in channels_last (NHWC) "
                       "memory format", convolutions_only=True),
        TrainingRecipe("compile", _PYTORCH, "torch.compile of the model (forward and "
                       "backward); the optimizer step stays eager", compiled=True),
        TrainingRecipe("compile-step", _PYTORCH, "torch.compile of the whole training step: "
                       "forward, loss, backward and optimizer step", compiled=True),
        TrainingRecipe("cudnn-benchmark", _PYTORCH, "torch.backends.cudnn.benchmark: cuDNN "
                       "times its convolution algorithms and keeps the fastest",
                       gpu_only="cudnn.benchmark tunes cuDNN, which only a GPU has",
                       convolutions_only=True),
        TrainingRecipe("foreach", _PYTORCH, "the optimizer's multi-tensor (foreach) "
                       "implementation"),
        TrainingRecipe("fused", _PYTORCH, "the optimizer's fused implementation (one kernel "
                       "for the whole update)"),
        TrainingRecipe("graph", _TENSORFLOW, "the training step as a tf.function graph",
                       compiled=True),
        TrainingRecipe("xla", _TENSORFLOW, "the training step as tf.function(jit_compile="
                       "True): XLA", compiled=True),
        TrainingRecipe("legacy-optimizer", _TENSORFLOW, "the optimizer of "
                       "tf.keras.optimizers.legacy (eager): one C++ kernel per variable "
                       "(ResourceApplyAdam, ResourceApplyKerasMomentum), the implementation "
                       "before TensorFlow 2.11, whose optimizers compose TensorFlow ops"),
        TrainingRecipe("channels-first", _TENSORFLOW, "convolutions in channels_first (NCHW)",
                       gpu_only="TensorFlow's CPU convolution and pooling kernels support "
                       "only NHWC (channels_last)", convolutions_only=True),
        TrainingRecipe("jit", _JAX, "the training step's functions under jax.jit: XLA",
                       compiled=True),
    )
})


@dataclass(frozen=True)
class TrainingOptimization:
    """A recipe in a precision, named `<recipe>` (fp32) or `<recipe>-<precision>`."""

    name: str
    recipe: TrainingRecipe
    precision: Precision

    @property
    def description(self) -> str:
        if self.precision.name == "fp32":
            return self.recipe.description
        how = {"bf16": "bf16 (autocast / the mixed_bfloat16 policy)",
               "fp16": "fp16 (autocast with a gradient scaler / the mixed_float16 policy "
                       "with loss scaling)"}[self.precision.name]
        return f"{self.recipe.description}, in {how}"

    def unsupported_reason(self, framework: str, device: str) -> str | None:
        """Why this optimization cannot apply to the framework and device (None if it can)."""
        if framework not in self.recipe.frameworks:
            return other_framework_reason(self.name, framework, self.recipe.frameworks,
                                          " training")
        if self.recipe.gpu_only and device != "gpu":
            return f"optimization '{self.name}': {self.recipe.gpu_only}"
        return None

    def describe(self) -> dict:
        """The recipe's parameters, as recorded in every result."""
        return {"recipe": self.recipe.name, "precision": self.precision.name,
                "compile_mode": None}


OPTIMIZATIONS = MappingProxyType({
    f"{recipe.name}{PRECISIONS[p].suffix}": TrainingOptimization(
        f"{recipe.name}{PRECISIONS[p].suffix}", recipe, PRECISIONS[p])
    for recipe in RECIPES.values() for p in ("fp32", "bf16", "fp16")
})


@dataclass(frozen=True)
class Optimizer:
    name: str
    description: str
    learning_rate: float  # the default; the config may set another
    momentum: float | None = None


# The published setup trained with SGD, momentum 0.9, learning rate 0.01; Adam at its
# usual default learning rate.
OPTIMIZERS = MappingProxyType({
    o.name: o for o in (
        Optimizer("sgd", "SGD with momentum 0.9", 0.01, momentum=0.9),
        Optimizer("adam", "Adam (betas 0.9, 0.999; epsilon 1e-7 in both frameworks)", 0.001),
    )
})
