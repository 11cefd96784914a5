"""The measurement settings: defined once, in the config schema's `measurement` section
(names, types, limits, defaults, descriptions), from which the workflow's command lines and
`dlbench run`'s options are both derived, so that they cannot drift apart.

Settings added after dlbench's first result format (v1) carry `x-v1` in the schema: the
value that measures as v1 did (e.g. adaptive stopping off). Such a setting appears on a
command line only when its value differs from that one (and one marked `x-only-with`
only when the setting it depends on appears), and `dlbench run` defaults to it: a cell
whose protocol did not change keeps the command line it was measured with, and Snakemake
reuses its result instead of measuring it again.
"""

import argparse
from functools import cache

import jsonschema

# How the workflow cuts jobs, not how a cell is measured: not an option of `dlbench run`.
NOT_PER_CELL = ("process",)


@cache
def _properties() -> dict:
    from dlbench import config

    measurement = config.schema()["properties"]["measurement"]["properties"]
    return {name: spec for name, spec in measurement.items() if name not in NOT_PER_CELL}


def defaults() -> dict:
    return {name: spec["default"] for name, spec in _properties().items()}


def run_default(name: str):
    """What `dlbench run` measures with when the option is not given: the v1 value of a
    setting that has one, else the schema's default."""
    spec = _properties()[name]
    return spec.get("x-v1", spec["default"])


def _omitted(name: str, measurement: dict) -> bool:
    """Whether a setting stays off the command line: it has the value that measures as v1
    did (or depends on a setting that has)."""
    spec = _properties().get(name, {})
    if "x-v1" in spec and measurement.get(name, spec["x-v1"]) == spec["x-v1"]:
        return True
    depends = spec.get("x-only-with")
    return depends is not None and _omitted(depends, measurement)


def to_args(measurement: dict) -> list[str]:
    """The settings as `dlbench run` options, sorted (the order of keys in a config file
    must not count as a change of parameters); see the module's note on `x-v1`."""
    return [f"--{name.replace('_', '-')}={value}" for name, value in sorted(measurement.items())
            if name not in NOT_PER_CELL and not _omitted(name, measurement)]


def add_options(parser: argparse.ArgumentParser) -> None:
    """`dlbench run`'s measurement options, each checked against its schema."""
    for name, spec in _properties().items():
        default = run_default(name)
        help_text = " ".join(spec["description"].split())
        if default != spec["default"]:
            help_text += (f" (default here {default}, as dlbench v1 measured; the workflow "
                          f"passes its config's value, by default {spec['default']})")
        parser.add_argument(f"--{name.replace('_', '-')}", type=_checked(name, spec),
                            default=default, help=help_text.replace("%", "%%"))


def from_args(args: argparse.Namespace) -> dict:
    return {name: getattr(args, name) for name in _properties()}


def _checked(name: str, spec: dict):
    """Parse one option's text as its schema's type and check it against the schema."""
    def parse(text: str):
        try:
            value = {"integer": int, "number": float}.get(spec["type"], str)(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not {spec['type']}") from None
        try:
            jsonschema.validate(value, spec)
        except jsonschema.ValidationError as exc:
            raise argparse.ArgumentTypeError(f"{text}: {exc.message}") from None
        return value

    parse.__name__ = name  # argparse names the option's type in its messages
    return parse
