"""One codec for what a cell's process is told on its command line: from each setting's
JSON schema (name, type, limits, default, description) it writes the option that carries
a config's value, declares the matching `argparse` option, and reads the typed value back,
checked against the same schema. Measurement settings, scenario settings and size axes
all go through it: a setting is declared once, as its schema, and cannot be dropped or
mistyped on its way to the cell.

How a value reads: `--<name>=<value>` (underscores become dashes); a boolean is a switch,
`--<name>` or `--no-<name>`; a list (a group's sizes) is `--<name> <value> <value> …`.
Keys of the schema that steer the codec:

- `x-v1`: the value that measures as dlbench v1 did. The option stays off the command
  line while the value is this one, and `dlbench run` defaults to it: a cell whose
  protocol did not change keeps the command line it was measured with, and Snakemake
  reuses its result instead of measuring it again.
- `x-only-with: <setting>`: on the command line only when that setting is.
- `x-per-axis: <axis>`: an object with one value per value of a size axis (a learning
  rate per optimizer): a cell's command line carries the value of its own.
"""

import argparse
from typing import Any, Protocol

import jsonschema


class HasSizes(Protocol):
    """What the codec asks of a cell (dlbench.scenarios.cell.Cell): its value of a size axis."""

    def size(self, axis: str) -> int | str: ...

PYTHON_TYPES = {"integer": int, "number": float, "string": str}


def option(name: str) -> str:
    """The command-line option of a setting or axis: --min-duration-s."""
    return f"--{name.replace('_', '-')}"


class Codec:
    """The settings of one schema (its `properties`), in their declared order: the order
    of the options on a command line, which Snakemake compares with its records."""

    def __init__(self, properties: dict[str, dict], context: str = "", many: bool = False):
        self.properties = properties
        self.context = context  # before each option's help: "training: "
        self.many = many  # each option takes one value or several (a group's sizes)

    # -- config → command line ---------------------------------------------------------------

    def to_args(self, values: dict, cell: HasSizes | None = None) -> list[str]:
        """The options carrying `values` (a config section, a cell's sizes), in the
        declared order; a name missing from `values` is left to `dlbench run`'s default."""
        args = []
        for name, spec in self.properties.items():
            if name not in values or self._omitted(name, values):
                continue
            args += self._encode(name, spec, self._cell_value(name, values[name], cell))
        return args

    def _cell_value(self, name: str, value: Any, cell: HasSizes | None) -> Any:
        """A per-axis setting's value for the cell (its key's default where the config
        leaves it out); any other value as it is."""
        axis = self.properties[name].get("x-per-axis")
        if axis is None:
            return value
        if cell is None:
            raise ValueError(f"{name}: one value per {axis}, so a cell is needed to write it")
        key = cell.size(axis)
        return value.get(key, self.properties[name]["properties"][key]["default"])

    def _encode(self, name: str, spec: dict, value: Any) -> list[str]:
        if spec.get("type") == "boolean":
            return [option(name) if value else option(f"no_{name}")]
        if isinstance(value, list | tuple):
            return [option(name), *map(str, value)]
        return [f"{option(name)}={value}"]

    def _omitted(self, name: str, values: dict) -> bool:
        """Whether a setting stays off the command line: it has the value that measures as
        v1 did (or depends on a setting that has); see the module's note on `x-v1`."""
        spec = self.properties.get(name, {})
        if "x-v1" in spec and values.get(name, spec["x-v1"]) == spec["x-v1"]:
            return True
        depends = spec.get("x-only-with")
        return depends is not None and self._omitted(depends, values)

    # -- the options of `dlbench run` -------------------------------------------------------

    def run_default(self, name: str) -> Any:
        """What `dlbench run` uses when the option is not given: the v1 value of a setting
        that has one, else the schema's default (None: none; a per-axis setting's is its
        axis value's, see `from_args`)."""
        spec = self.properties[name]
        if self.many or "x-per-axis" in spec:
            return None
        return spec.get("x-v1", spec.get("default"))

    def add_options(self, parser: argparse.ArgumentParser) -> None:
        """One option per setting, its value checked against the setting's schema."""
        for name, spec in self.properties.items():
            default = self.run_default(name)
            if spec.get("type") == "boolean":
                parser.add_argument(option(name), action=argparse.BooleanOptionalAction,
                                    default=default, help=self._help(name, spec, default))
                continue
            value_schema = _value_schema(spec)
            parser.add_argument(option(name), type=checked(name, value_schema),
                                nargs="+" if self.many else None, default=default,
                                help=self._help(name, spec, default))

    def _help(self, name: str, spec: dict, default: Any) -> str:
        text = self.context + " ".join(spec.get("description", name).split())
        if "x-v1" in spec and default != spec.get("default"):
            text += (f" (default here {default}, as dlbench v1 measured; the workflow "
                     f"passes its config's value, by default {spec['default']})")
        elif self.many:
            text += ": one value, or several (see --out-dir)"
        elif "x-per-axis" in spec:
            text += f" (default: its {spec['x-per-axis']}'s own)"
        elif default is not None:
            text += f" (default: {default})"
        return text.replace("%", "%%")

    # -- command line → typed settings --------------------------------------------------------

    def from_args(self, args: argparse.Namespace, cell: HasSizes | None = None) -> dict:
        """The settings as `dlbench run` parsed them, typed; a per-axis setting not given
        is the default of the cell's axis value."""
        values = {}
        for name, spec in self.properties.items():
            value = getattr(args, name)
            axis = spec.get("x-per-axis")
            if axis is not None and value is None:
                if cell is None:
                    raise ValueError(f"{name}: its default is per {axis}; a cell is needed")
                value = spec["properties"][cell.size(axis)]["default"]
            values[name] = value
        return values


def _value_schema(spec: dict) -> dict:
    """The schema one option's value is checked against: a per-axis setting's values
    share one (that of its first key, less the key's default)."""
    if "x-per-axis" not in spec:
        return spec
    first = next(iter(spec["properties"].values()))
    return {key: value for key, value in first.items() if key != "default"}


def checked(name: str, spec: dict):
    """Parse one option's text as its schema's type and check it against the schema."""
    def parse(text: str):
        try:
            value = PYTHON_TYPES.get(spec.get("type"), str)(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not {spec['type']}") from None
        try:
            jsonschema.validate(value, spec)
        except jsonschema.ValidationError as exc:
            raise argparse.ArgumentTypeError(f"{text}: {exc.message}") from None
        return value

    parse.__name__ = name  # argparse names the option's type in its messages
    return parse

