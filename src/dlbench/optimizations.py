"""Optimizations: each named once here, with the frameworks that implement it.

A framework backend implements a recipe for every name listed with its framework
(`RECIPES` in dlbench.frameworks.<name>); adding one is an entry here and a recipe there.
"""

from dataclasses import dataclass
from types import MappingProxyType


@dataclass(frozen=True)
class Optimization:
    name: str
    frameworks: frozenset[str]
    description: str


OPTIMIZATIONS = MappingProxyType(
    {
        o.name: o
        for o in (
            Optimization(
                "eager", frozenset({"pytorch", "tensorflow"}), "the framework's default, op by op"
            ),
            Optimization("graph", frozenset({"tensorflow"}), "tf.function graph execution"),
        )
    }
)
