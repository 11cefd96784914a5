"""What a framework declares about itself, read without importing the framework: the
harness asks these questions instead of naming frameworks (dlbench.frameworks.registry
loads one per registered framework from its folder's `about` module)."""

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType


@dataclass(frozen=True)
class GemmLibrary:
    """A library whose matrix product bounds the framework's cells (dlbench.measure.peak)."""

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
    # Why a family's class cannot run in a reduced precision, where it cannot.
    no_mixed_precision: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    # Why a family's class cannot compute in float16, where it cannot (bf16 may still run).
    no_fp16: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    # Why its input pipelines cannot pin host memory (None: they can).
    no_pinned_memory: str | None = None
    # Per device, the lowest measurement protocol of its inference cells: 2 where dlbench
    # after v1 measures it differently from v1 (absent: the recipe's protocol).
    inference_protocol: Mapping[str, int] = field(
        default_factory=lambda: MappingProxyType({}))

    # Libraries that transformers and Keras import whenever they are installed, for code
    # none of its cells runs (scikit-learn for assisted generation and estimator wrappers,
    # SciPy for object detection's loss): its measuring process marks them absent, as it
    # does the other frameworks (dlbench.frameworks.registry.unused_imports), which saves
    # seconds of every cell's start-up on 2 cores. One its own code needs stays listed out
    # (JAX's sparse module imports SciPy).
    unused_imports: tuple[str, ...] = ("sklearn", "scipy")

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

    def model_class(self, family: str) -> str | None:
        """The transformers class that builds `family` here (None: there is none)."""
        return self.model_classes.get(family)
