"""The recipe registry: every recipe of every scenario, declared by the frameworks.

A recipe is one way a framework runs a scenario's step (op by op, traced, compiled, a
graph, XLA, or one knob turned against its default); an optimization is a recipe in one
precision, named `<recipe>` (fp32) or `<recipe>-<precision>`: `compile-bf16` is the recipe
`compile` in `bf16`, its precision held by the optimization, never read from its name.
Each framework declares its recipes in `dlbench/frameworks/<name>/recipes.py` (a tuple
`RECIPES`, importing no framework) and implements them in its scenario modules, each
precision once for all of them. Frameworks may share a name (`eager`): an optimization
exists in every framework that declares its recipe in its precision.

What is known without running a cell (a recipe the framework lacks, CUDA graphs off a
GPU) is a reason here; what depends on the model is the scenario's; what only the device
can say (does this CPU have native bf16?) is the backend's `precision_problem`.
"""

import importlib
import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from functools import cache
from types import MappingProxyType

from dlbench.catalogue.axes import FRAMEWORKS, other_framework_reason
from dlbench.catalogue.precisions import PRECISIONS, Precision

# The planted-error recipe (a test of the correctness check) exists only where this
# variable is 1: no config can reach it otherwise.
TEST_RECIPES_VARIABLE = "DLBENCH_TEST_RECIPES"

# The two kinds of recipe (Recipe.kind).
EAGER, COMPILED = "eager", "compiled"


@dataclass(frozen=True)
class Scope:
    """What the recipes of some scenarios share: the scenarios, the precisions a recipe
    combines with unless it says otherwise, and how descriptions and reasons read."""

    scenarios: tuple[str, ...]
    precisions: tuple[str, ...]
    # How an optimization's description names a reduced precision (default: its name).
    precision_phrases: tuple[tuple[str, str], ...] = ()
    # Follows the framework in the reason of a recipe it lacks: "… in PyTorch training".
    reason_suffix: str = ""


# A transformer's forward pass; the training step (of the CNN and of a transformer).
INFERENCE = Scope(("inference",), ("fp32", "tf32", "bf16", "fp16"))
TRAINING = Scope(
    ("training", "train_step"), ("fp32", "bf16", "fp16"),
    precision_phrases=(
        ("bf16", "bf16 (autocast / the mixed_bfloat16 policy)"),
        ("fp16", "fp16 (autocast with a gradient scaler / the mixed_float16 policy with "
                 "loss scaling)"),
    ),
    reason_suffix=" training",
)
# Text generation: a decoder's greedy decoding of a fixed number of new tokens.
GENERATION = Scope(("generation",), ("fp32", "bf16"), reason_suffix=" generation")


@dataclass(frozen=True)
class Recipe:
    """A way to run a scenario's step, before any precision is applied."""

    name: str
    description: str
    scope: Scope
    # The step runs as one captured program (a trace, a graph, Inductor, XLA) rather than
    # op by op: a comparison is like for like when both sides had one.
    compiled: bool = False
    # The precisions it combines with; empty: its scope's.
    precisions: tuple[str, ...] = ()
    # Why the recipe needs a GPU, if it does.
    gpu_only: str | None = None
    # Why the recipe runs on the CPU only, if it does.
    cpu_only: str | None = None
    # The library whose matrix product its linear layers run where it is not the
    # framework's default (a GemmLibrary key): the efficiency's "own GEMM" of its cells.
    gemm_library: str | None = None
    # The protocol this recipe is measured with: raised whenever what it measures changes,
    # so that a workflow measures its cells again instead of reusing older results.
    protocol: int = 1
    # -- knobs of inference recipes ------------------------------------------------------
    # torch.compile's mode, for the compile recipes.
    compile_mode: str | None = None
    # On a GPU the recipe records CUDA graphs: the call after the first records them, so
    # this many warm-up calls run whatever measurement.warmup_iterations says, and the
    # recording never lands in the timed loop.
    gpu_graph_warmup: int = 0
    # Inductor options of the compile recipes on the CPU (torch._inductor.config).
    inductor_cpu: tuple[tuple[str, object], ...] = ()
    # Multiplies the output by this factor: a deliberately wrong answer (tests only; in
    # generation, any value changes one generated token).
    perturb: float | None = None
    # transformers' attention implementation the recipe runs whatever
    # measurement.attention says (PyTorch's `-sdpa` recipes: "sdpa"); None: the setting's.
    attention: str | None = None
    # -- knobs of training recipes -------------------------------------------------------
    # The recipe changes the layout of convolutions: meaningless without them.
    convolutions_only: bool = False

    def __post_init__(self) -> None:
        if not self.precisions:
            object.__setattr__(self, "precisions", self.scope.precisions)
        unknown = set(self.precisions) - set(PRECISIONS)
        if unknown:
            raise ValueError(f"recipe {self.name!r}: unknown precisions {sorted(unknown)}")

    @property
    def scenarios(self) -> tuple[str, ...]:
        return self.scope.scenarios

    @property
    def kind(self) -> str:
        """'compiled' or 'eager' (see `compiled`)."""
        return COMPILED if self.compiled else EAGER

    def attention_of(self, setting: str) -> str:
        """The attention implementation a cell of this recipe asks transformers for."""
        return self.attention or setting

    def min_warmup(self, device: str) -> int:
        """The fewest warm-up calls on this device (CUDA graphs record on a GPU)."""
        return self.gpu_graph_warmup if device == "gpu" else 0


# The default recipes, which every framework lists among its own.
EAGER_INFERENCE = Recipe("eager", "the framework's default, op by op", INFERENCE)
EAGER_TRAINING = Recipe("eager", "the framework's default: PyTorch eager in NCHW, "
                        "TensorFlow eager (GradientTape) in NHWC", TRAINING)
# Recipes of every framework where TEST_RECIPES_VARIABLE is 1 (the scenario applies them
# around the framework's eager step).
TEST_RECIPES = (
    Recipe("planted-error", "the framework's default recipe (eager where it has one) with "
           "its output scaled by 1.01 (tests the check)",
           INFERENCE, precisions=("fp32",), perturb=1.01),
)


@dataclass(frozen=True)
class Optimization:
    """A recipe in a precision, as one framework declares it; `frameworks`: every framework
    that declares a recipe of this name in this precision for the scenario."""

    recipe: Recipe
    precision: Precision
    frameworks: frozenset[str]

    @property
    def name(self) -> str:
        return self.recipe.name + self.precision.suffix

    @property
    def description(self) -> str:
        if self.precision.name == "fp32":
            return self.recipe.description
        phrase = dict(self.recipe.scope.precision_phrases).get(self.precision.name,
                                                               self.precision.name)
        return f"{self.recipe.description}, in {phrase}"

    def unsupported_reason(self, framework: str, device: str) -> str | None:
        """Why this optimization cannot apply to the framework and device (None if it can)."""
        if framework not in self.frameworks:
            return other_framework_reason(self.name, framework, self.frameworks,
                                          self.recipe.scope.reason_suffix)
        if device != "gpu":
            for why in (self.recipe.gpu_only, self.precision.gpu_only):
                if why:
                    return f"optimization '{self.name}': {why}"
        elif self.recipe.cpu_only:
            return f"optimization '{self.name}': {self.recipe.cpu_only}"
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


def declared(framework: str) -> tuple[Recipe, ...]:
    """The recipes a framework declares in its recipes module (no framework imported)."""
    return tuple(importlib.import_module(f"dlbench.frameworks.{framework}.recipes").RECIPES)


def _declarations() -> Iterator[tuple[str, Recipe]]:
    """(framework, recipe) of every registered framework, then the tests' recipes."""
    for framework in FRAMEWORKS:
        for recipe in declared(framework):
            yield framework, recipe
    if os.environ.get(TEST_RECIPES_VARIABLE) == "1":
        for framework in FRAMEWORKS:
            for recipe in TEST_RECIPES:
                yield framework, recipe


@cache
def _registry() -> Mapping[str, Mapping[str, Mapping[str, Optimization]]]:
    """scenario → optimization name → framework → its Optimization, in declaration order."""
    table: dict[str, dict[str, dict[str, tuple[Recipe, Precision]]]] = {}
    for framework, recipe in _declarations():
        for scenario in recipe.scenarios:
            for p in recipe.precisions:
                precision = PRECISIONS[p]
                name = recipe.name + precision.suffix
                per_framework = table.setdefault(scenario, {}).setdefault(name, {})
                if framework in per_framework:
                    raise ValueError(f"{framework} declares the {scenario} optimization "
                                     f"{name!r} twice")
                per_framework[framework] = (recipe, precision)
    registry = {}
    for scenario, names in table.items():
        registry[scenario] = {}
        for name, per_framework in names.items():
            _check_alike(scenario, name, per_framework)
            frameworks = frozenset(per_framework)
            registry[scenario][name] = MappingProxyType(
                {f: Optimization(r, p, frameworks) for f, (r, p) in per_framework.items()})
        registry[scenario] = MappingProxyType(registry[scenario])
    return MappingProxyType(registry)


def _check_alike(scenario: str, name: str,
                 per_framework: dict[str, tuple[Recipe, Precision]]) -> None:
    """One name is one optimization: the same kind and precision in every framework (the
    analysis asks them of a name alone)."""
    seen = {(recipe.kind, precision.name) for recipe, precision in per_framework.values()}
    if len(seen) > 1:
        which = "; ".join(f"{f}: {r.kind}, {p.name}" for f, (r, p) in per_framework.items())
        raise ValueError(f"the {scenario} optimization {name!r} differs between "
                         f"frameworks ({which})")


def optimizations(scenario: str) -> Mapping[str, Optimization]:
    """A scenario's optimizations by name, in declaration order (each as the first
    framework that declares it has it; empty for a scenario without recipes)."""
    return MappingProxyType({name: next(iter(per_framework.values()))
                             for name, per_framework in _registry().get(scenario, {}).items()})


def optimization(scenario: str, name: str, framework: str | None = None) -> Optimization:
    """A scenario's optimization as `framework` declares it (as the first framework that
    declares it, where `framework` does not or is None). KeyError for an unknown name."""
    per_framework = _registry().get(scenario, {})[name]
    if framework in per_framework:
        return per_framework[framework]
    return next(iter(per_framework.values()))


def scopes() -> list[Scope]:
    """The scopes of the declared recipes, in declaration order."""
    return list(dict.fromkeys(recipe.scope for _, recipe in _declarations()))


def recorded_precision(scenario: object, optimization: object, recorded: object) -> str | None:
    """The precision of a cell's record: the one it records; else its optimization's in the
    registry; else, for a name the registry does not know (records of older dlbench, of
    plugin scenarios), read from the name's suffix: the one place a name is parsed."""
    if isinstance(recorded, str) and recorded in PRECISIONS:
        return recorded
    if not isinstance(optimization, str):
        return None
    known = _registry().get(scenario, {}) if isinstance(scenario, str) else {}
    if optimization in known:
        return next(iter(known[optimization].values())).precision.name
    suffix = optimization.rsplit("-", 1)[-1]
    return suffix if suffix in PRECISIONS and suffix != "fp32" else "fp32"
