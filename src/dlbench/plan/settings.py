"""The measurement settings: defined once, in the config schema's `measurement` section
(names, types, limits, defaults, descriptions); dlbench.scenarios.codec derives from it both the
workflow's command lines and `dlbench run`'s options, so that they cannot drift apart.

Settings added after dlbench's first result format (v1) carry `x-v1` in the schema (see
dlbench.scenarios.codec): a cell whose protocol did not change keeps the command line it was
measured with, and Snakemake reuses its result instead of measuring it again.
"""

import argparse
from functools import cache

from dlbench.scenarios.codec import Codec

# How the workflow cuts and orders jobs, and how its peak jobs wait, not how a cell is
# measured: not options of `dlbench run` (a job's round is an option of its own, --round).
NOT_PER_CELL = ("process", "rounds", "quiet_wait_s")


@cache
def codec() -> Codec:
    """The per-cell measurement settings, sorted by name: the order of keys in a config
    file must not count as a change of parameters."""
    from dlbench.plan import config

    measurement = config.schema()["properties"]["measurement"]["properties"]
    return Codec({name: measurement[name] for name in sorted(measurement)
                  if name not in NOT_PER_CELL})


def defaults() -> dict:
    return {name: spec["default"] for name, spec in codec().properties.items()}


def run_default(name: str):
    """What `dlbench run` measures with when the option is not given: the v1 value of a
    setting that has one, else the schema's default."""
    return codec().run_default(name)


def to_args(measurement: dict) -> list[str]:
    """The settings as `dlbench run` options (those at their v1 value left out)."""
    return codec().to_args(measurement)


def add_options(parser: argparse.ArgumentParser) -> None:
    """`dlbench run`'s measurement options, each checked against its schema."""
    codec().add_options(parser)


def from_args(args: argparse.Namespace) -> dict:
    return codec().from_args(args)
