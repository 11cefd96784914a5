"""The measurement settings: defined once, in the config schema's `measurement` section
(names, types, limits, defaults, descriptions), from which the workflow's command lines and
`dlbench run`'s options are both derived, so that they cannot drift apart."""

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


def to_args(measurement: dict) -> list[str]:
    """The settings as `dlbench run` options, sorted (the order of keys in a config file
    must not count as a change of parameters)."""
    return [f"--{name.replace('_', '-')}={value}" for name, value in sorted(measurement.items())
            if name not in NOT_PER_CELL]


def add_options(parser: argparse.ArgumentParser) -> None:
    """`dlbench run`'s measurement options, each checked against its schema."""
    for name, spec in _properties().items():
        parser.add_argument(f"--{name.replace('_', '-')}", type=_checked(name, spec),
                            default=spec["default"], help=" ".join(spec["description"].split()))


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
