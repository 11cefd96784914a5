"""Config validation: one clear message per problem, before any job starts.

The schema (workflow/schemas/config.schema.yaml) gives the structure; the allowed names
come from the registries, so a new model or optimization is added in one place only.
"""

import copy
import difflib
from functools import cache
from pathlib import Path

import jsonschema
import yaml

from dlbench import SCHEMA_DIR
from dlbench.axes import DEVICES, FRAMEWORKS, SCENARIOS
from dlbench.models import MODELS
from dlbench.optimizations import OPTIMIZATIONS

SCHEMA_PATH = SCHEMA_DIR / "config.schema.yaml"


class ConfigError(ValueError):
    """A config that must not run; the message names every problem."""


@cache
def _schema() -> dict:
    schema = yaml.safe_load(SCHEMA_PATH.read_text())
    props = schema["properties"]
    props["scenario"]["enum"] = list(SCENARIOS)
    for key, names in {
        "frameworks": FRAMEWORKS,
        "models": MODELS,
        "devices": DEVICES,
        "optimizations": OPTIMIZATIONS,
    }.items():
        props[key]["items"]["enum"] = list(names)
    return schema


def schema() -> dict:
    """The config schema with the registries' names filled in."""
    return copy.deepcopy(_schema())


def validate(config: dict, source: str = "config") -> dict:
    """A copy of config with defaults filled in; ConfigError naming every problem."""
    if not isinstance(config, dict):
        raise ConfigError(f"{source}: the config must be a mapping of keys to values")
    validator = jsonschema.Draft202012Validator(_schema())
    errors = sorted(validator.iter_errors(config), key=lambda e: list(map(str, e.path)))
    if errors:
        lines = "\n".join(f"  - {_describe(e)}" for e in errors)
        raise ConfigError(f"invalid {source}:\n{lines}")
    return _with_defaults(_schema(), copy.deepcopy(config))


def type_command_line(config: dict, overrides: dict) -> None:
    """Read the `--config` values in `config` as a config file would read them.

    Snakemake parses `--config key=value` with YAML's BaseLoader, so every scalar is a
    string (`batch_sizes=[1,4]` gives ["1", "4"]); values from config files keep their
    types and are validated as written.
    """
    for key, value in overrides.items():
        if isinstance(value, dict) and isinstance(config.get(key), dict):
            type_command_line(config[key], value)
        elif key in config:
            config[key] = _typed(config[key])


def _typed(value):
    if isinstance(value, list):
        return [_typed(v) for v in value]
    if isinstance(value, dict):
        return {k: _typed(v) for k, v in value.items()}
    if isinstance(value, str):
        try:
            return yaml.safe_load(value) if value.strip() else value
        except yaml.YAMLError:
            return value
    return value


def load_file(path: str | Path) -> dict:
    """Read and validate a config file."""
    path = Path(path)
    try:
        config = yaml.safe_load(path.read_text())
    except FileNotFoundError:
        raise ConfigError(f"config file {path} does not exist") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"config file {path} is not valid YAML: {exc}") from None
    return validate(config, source=f"config file {path}")


def _with_defaults(schema: dict, instance: dict) -> dict:
    for key, sub in schema.get("properties", {}).items():
        if key not in instance and "default" in sub:
            instance[key] = copy.deepcopy(sub["default"])
        if sub.get("type") == "object" and isinstance(instance.get(key), dict):
            _with_defaults(sub, instance[key])
    return instance


def _key(error: jsonschema.ValidationError) -> str:
    key = ""
    for part in error.absolute_path:
        key += f"[{part}]" if isinstance(part, int) else (f".{part}" if key else str(part))
    return key


def _expected(schema: dict) -> str:
    """What a scalar must be, in words."""
    kind = {"integer": "an integer", "number": "a number", "string": "a string"}.get(
        schema.get("type"), schema.get("type", "a value")
    )
    if schema.get("minimum") == 1 and schema.get("type") == "integer":
        return "a positive integer"
    if schema.get("minimum") == 0:
        return f"{kind} ≥ 0"
    if schema.get("exclusiveMinimum") == 0:
        return "a positive number"
    return kind


def _suggest(value: object, options: list[str], prefix: str = "") -> str:
    starts = [o for o in options if str(o).startswith(str(value))]  # 'bert' → bert-base-…
    close = starts[:1] or difflib.get_close_matches(str(value), options, n=1, cutoff=0.6)
    return f" (did you mean '{prefix}{close[0]}'?)" if close else ""


def _describe(error: jsonschema.ValidationError) -> str:
    key, value, schema = _key(error), error.instance, error.schema
    where = f"config key '{key}'" if key else "config"
    match error.validator:
        case "additionalProperties":
            allowed = list(schema["properties"])
            unknown = [k for k in value if k not in allowed]
            prefix = f"{key}." if key else ""
            return "; ".join(
                f"unknown config key '{prefix}{k}'{_suggest(k, allowed, prefix)}; "
                f"allowed keys: {', '.join(prefix + a for a in allowed)}"
                for k in unknown
            )
        case "enum":
            return (
                f"{where}: {value!r} is not allowed{_suggest(value, error.validator_value)}; "
                f"allowed values: {', '.join(map(str, error.validator_value))}"
            )
        case "required":
            missing = error.message.split("'")[1]
            prefix = f"{key}." if key else ""
            meaning = schema["properties"][missing].get("description", "")
            return f"missing config key '{prefix}{missing}': {meaning}"
        case "minItems":
            allowed = schema["items"].get("enum")
            hint = f"; allowed values: {', '.join(map(str, allowed))}" if allowed else ""
            return f"{where} is empty: give at least one value{hint}"
        case "uniqueItems":
            return f"{where}: {value!r} lists a value more than once"
        case "type" if schema.get("type") == "array":
            return f"{where}: {value!r} must be a list, for example [{value!r}]"
        case "type" if schema.get("type") == "object":
            return f"{where}: {value!r} must be a mapping of keys to values"
        case "pattern":
            return (
                f"{where}: {value!r} has characters outside the allowed set "
                f"(regular expression {error.validator_value})"
            )
        case "type" | "minimum" | "exclusiveMinimum":
            return f"{where}: {value!r} is not allowed; it must be {_expected(schema)}"
        case _:
            return f"{where}: {error.message}"
