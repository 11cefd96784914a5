"""The registered frameworks. Adding one is a folder dlbench/frameworks/<name>/ (its
`about` module declares it, `backend` and the scenarios' operations implement it) and one
line in REGISTERED.

Importing this module imports no framework: the `about` modules are light.
"""

import importlib
import sys
from functools import cache

from dlbench.frameworks.descriptor import Framework

# One line per framework, in the order every listing shows them.
REGISTERED = (
    "pytorch",
    "tensorflow",
    "jax",
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


def frameworks() -> tuple[Framework, ...]:
    """Every registered framework's declaration, in REGISTERED's order."""
    return tuple(get(name) for name in REGISTERED)


def labels() -> dict[str, str]:
    """Each framework's name as the report writes it, e.g. {"pytorch": "PyTorch"}."""
    return {framework.name: framework.label for framework in frameworks()}


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


def leave_out_unused_imports(name: str) -> None:
    """In a process that runs framework `name` alone (a measuring child, a reference or a
    peak job): mark its unused imports absent, so that transformers, Keras and TensorFlow
    carry on without them (seconds of every such process's start-up on 2 cores)."""
    for unused in unused_imports(name):
        sys.modules.setdefault(unused, None)
