"""The frameworks, as the harness knows them without importing one: what a framework
declares about itself (`Framework`, in its folder's `about` module: dlbench/frameworks/<name>/
about.py), and the registered ones. The harness asks these questions instead of naming
frameworks. Adding one is a folder dlbench/frameworks/<name>/ (its `about` module declares
it, `backend` and the scenarios' operations implement it) and one line in REGISTERED.

Importing this module imports no framework: the `about` modules are light, and import
nothing of dlbench but this module.
"""

import importlib
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import cache
from types import MappingProxyType


@dataclass(frozen=True)
class GemmLibrary:
    """A library whose matrix product bounds the framework's cells (dlbench.run.peak)."""

    key: str  # its name in paths and commands, e.g. "torch-linear"
    name: str  # as the report names it
    devices: tuple[str, ...]
    default: bool  # the framework's own path: what its eager layers reach


@dataclass(frozen=True, eq=False)
class Framework:
    name: str  # as in cell ids, command lines and the folder dlbench/frameworks/<name>/
    label: str  # as the report names it
    color: str  # its colour in every report's figures (a matplotlib colour)
    environment: str  # its conda environment file, relative to the repository
    # Its packages whose versions every result's environment fingerprint records.
    distributions: tuple[str, ...]
    # The transformers class of each model family (dlbench.catalogue.models.FAMILIES); a family
    # missing here has no class in this framework, and its cells are `unsupported`.
    model_classes: Mapping[str, str]
    # The libraries whose matrix products are measured for the machine's peak, its
    # default (what its eager layers reach) first.
    gemm_libraries: tuple[GemmLibrary, ...]
    # The scenarios it measures (None: every one). Its cells of another scenario are not
    # applicable by design, as another framework's optimization is, and its folder needs
    # no operations module for them (an inference-only runtime).
    scenarios: tuple[str, ...] | None = None
    # Why a family that transformers has a class for cannot run here (e.g. its export fails):
    # its cells are `unsupported` with this reason, not for want of a class.
    no_family: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    # Why a family's class cannot run in a reduced precision, where it cannot.
    no_mixed_precision: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    # Why a family's class cannot compute in float16, where it cannot (bf16 may still run).
    no_fp16: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    # Why its input pipelines cannot pin host memory (None: they can).
    no_pinned_memory: str | None = None
    # Why its jobs import it themselves rather than being forked by a warm parent that
    # imported it once (dlbench.warm; None: they are forked), e.g. cells measured slower so.
    no_warm_parent: str | None = None
    # Per device, the lowest measurement protocol of its inference cells: 2 where dlbench
    # after v1 measures it differently from v1 (absent: the recipe's protocol).
    inference_protocol: Mapping[str, int] = field(
        default_factory=lambda: MappingProxyType({}))

    # Libraries that transformers and Keras import whenever they are installed, for code
    # none of its cells runs (scikit-learn for assisted generation and estimator wrappers,
    # SciPy for object detection's loss): its measuring process marks them absent, as it
    # does the other frameworks (unused_imports, below), which saves seconds of every
    # cell's start-up on 2 cores. One its own code needs stays listed out (JAX's sparse
    # module imports SciPy).
    unused_imports: tuple[str, ...] = ("sklearn", "scipy")

    # The recipe its users run a model's inference with by default: the step that the
    # planted-error test recipe perturbs (an inference runtime has no eager recipe).
    default_inference: str = "eager"
    # The recipe of its training step as its users run it by default (the analysis of
    # train_step compares optimizers there first).
    default_step: str = "eager"
    # Where its default optimizer composes ops per variable while one of its recipes runs
    # one kernel per variable: (that recipe, what the analysis says of it).
    kernel_per_variable: tuple[str, str] | None = None
    # How the report's GPU and mixed-precision sections describe it, in words (a framework
    # that leaves one out is listed as not declaring it): how its GPU cells are timed, where
    # their GPU memory figures come from, and what its reduced precisions compute in the
    # reduced type and keep in float32, with where a cell's list of ops comes from.
    gpu_timing: str = ""
    gpu_memory: str = ""
    mixed_precision: str = ""

    def measures(self, scenario: str) -> bool:
        """Whether it measures `scenario` (see `scenarios`)."""
        return self.scenarios is None or scenario in self.scenarios

    def model_class(self, family: str) -> str | None:
        """The transformers class that builds `family` here (None: there is none)."""
        return self.model_classes.get(family)


# One line per framework, in the order every listing shows them.
REGISTERED = (
    "pytorch",
    "tensorflow",
    "jax",
    "onnxruntime",
)

# The framework whose eager fp32 output on the CPU is every inference cell's reference
# (dlbench.reference): it builds the shared seeded weights that the others load.
REFERENCE_FRAMEWORK = "pytorch"


@cache
def get(name: str) -> Framework:
    """A registered framework's declaration (its folder's `about.FRAMEWORK`)."""
    if name not in REGISTERED:
        raise ValueError(f"unknown framework {name!r}; known: {', '.join(REGISTERED)}")
    declared = importlib.import_module(f"dlbench.frameworks.{name}.about").FRAMEWORK
    if declared.name != name:
        raise ValueError(f"dlbench.frameworks.{name}.about declares {declared.name!r}")
    return declared


def declarations() -> tuple[Framework, ...]:
    """Every registered framework's declaration, in REGISTERED's order."""
    return tuple(get(name) for name in REGISTERED)


def measuring(scenario: str) -> tuple[str, ...]:
    """The registered frameworks that measure `scenario`, in REGISTERED's order."""
    return tuple(name for name in REGISTERED if get(name).measures(scenario))


def labels() -> dict[str, str]:
    """Each framework's name as the report writes it, e.g. {"pytorch": "PyTorch"}."""
    return {framework.name: framework.label for framework in declarations()}


def packages(name: str) -> set[str]:
    """The import names of framework `name`'s distributions ("_" for "-": tf-keras is
    tf_keras)."""
    return {package.replace("-", "_") for package in get(name).distributions}


def unused_imports(name: str) -> set[str]:
    """The packages that no cell of framework `name` runs but that transformers, Keras or
    TensorFlow import whenever they are installed: the other frameworks' and those its
    declaration lists."""
    others = set().union(*(packages(other) for other in REGISTERED if other != name))
    return (others | set(get(name).unused_imports)) - packages(name)


def leave_out_unused_imports(name: str, keep: Iterable[str] = ()) -> None:
    """In a process that runs framework `name` alone (a measuring child, a reference or a
    peak job): mark its unused imports absent, so that transformers, Keras and TensorFlow
    carry on without them (seconds of every such process's start-up on 2 cores). `keep`:
    packages left importable, which the process does use (ONNX's exporter's in a PyTorch
    process)."""
    for unused in unused_imports(name) - set(keep):
        sys.modules.setdefault(unused, None)
