"""Config validation: one clear message per problem, before any job starts.

The schema (workflow/schemas/config.schema.yaml) gives the structure shared by every
scenario; each scenario adds its own section (dlbench.scenarios), and the allowed names come
from the registries, so a new model, optimization or scenario is added in one place only.

The v1 layout, with one scenario's keys at the top level (`scenario: inference`, `models`,
`batch_sizes`, …), is still read: those keys belong to that scenario's section (inference
unless `scenario` says otherwise) and override its keys there, so that
`--config batch_sizes=[1,4]` narrows the inference section of any config.
"""

import copy
import difflib
import math
from functools import cache
from pathlib import Path

import jsonschema
import yaml

from dlbench import SCHEMA_DIR, scenarios
from dlbench.catalogue.axes import DEVICES, FRAMEWORKS
from dlbench.scenarios.cell import DEFAULT_SCENARIO

SCHEMA_PATH = SCHEMA_DIR / "config.schema.yaml"
FLAT_SCENARIO_KEY = "scenario"


class ConfigError(ValueError):
    """A config that must not run; the message names every problem."""


@cache
def _schema() -> dict:
    schema = yaml.safe_load(SCHEMA_PATH.read_text())
    props = schema["properties"]
    registered = scenarios.scenarios()
    props["scenarios"]["items"]["enum"] = list(registered)
    props[FLAT_SCENARIO_KEY]["enum"] = list(registered)
    props["frameworks"]["items"]["enum"] = list(FRAMEWORKS)
    props["devices"]["items"]["enum"] = list(DEVICES)
    for name, scenario in registered.items():
        props[name] = scenario.config_schema()
    return schema


def schema() -> dict:
    """The config schema with the scenarios' sections and the registries' names filled in."""
    return copy.deepcopy(_schema())


def validate(config: dict, source: str = "config") -> dict:
    """A copy of config with defaults filled in (and `scenarios` listing the scenarios to
    run); ConfigError naming every problem."""
    if not isinstance(config, dict):
        raise ConfigError(f"{source}: the config must be a mapping of keys to values")
    config, aliases = _sections(copy.deepcopy(config))
    validator = jsonschema.Draft202012Validator(_schema())
    errors = sorted(validator.iter_errors(config), key=lambda e: list(map(str, e.path)))
    named = {_key(e, aliases) for e in errors}
    lines = [_describe(e, aliases) for e in _one_per_key(errors)]
    lines += [line for key, line in _non_finite(config) if key not in named]
    if lines:
        raise ConfigError(f"invalid {source}:\n" + "\n".join(f"  - {line}" for line in lines))
    config = _with_defaults(_schema(), config)
    sections = [name for name in scenarios.scenarios() if name in config]
    config.setdefault("scenarios", sections)
    missing = [name for name in config["scenarios"] if name not in config]
    if not sections or missing:
        known = ", ".join(scenarios.scenarios())
        what = (f"'scenarios' lists {', '.join(missing)} without a section of that name"
                if missing else "the config has no scenario section")
        raise ConfigError(f"invalid {source}:\n  - {what}; add a section named after the "
                          f"scenario ({known}) with its models, optimizations and sizes")
    problems = [f"{name}: {p}" for name in config["scenarios"] for p in
                scenarios.optimization_problems(config[name], config["frameworks"], name)]
    problems += [p for name in config["scenarios"] for p in scenarios.get(name).validate(config)]
    problems += _duration_problems(config["measurement"])
    if problems:
        raise ConfigError(f"invalid {source}:\n" + "\n".join(f"  - {p}" for p in problems))
    return config


def _duration_problems(measurement: dict) -> list[str]:
    """Adaptive stopping needs room above the minimum to run on."""
    shortest, longest = measurement["min_duration_s"], measurement["max_duration_s"]
    if measurement["target_ci"] and longest < shortest:
        return [f"measurement: max_duration_s ({longest}) is shorter than min_duration_s "
                f"({shortest}); adaptive stopping (target_ci) could never run past the "
                "minimum: raise max_duration_s or set target_ci: 0"]
    return []


def _sections(config: dict) -> tuple[dict, dict[str, str]]:
    """The config with top-level keys of the v1 layout moved into their scenario's section,
    and how the moved keys were written (to name them so in messages)."""
    name = config.get(FLAT_SCENARIO_KEY, DEFAULT_SCENARIO)
    if not isinstance(name, str) or name not in scenarios.scenarios():
        return config, {}  # the schema names the bad value
    config.pop(FLAT_SCENARIO_KEY, None)
    section_keys = _schema()["properties"][name]["properties"]
    flat = {key: config.pop(key) for key in list(config) if key in section_keys
            and key not in _schema()["properties"]}
    if not flat:
        return config, {}
    section = config.get(name, {})
    if not isinstance(section, dict):  # the schema names the bad section; nothing to merge
        config.update(flat)
        return config, {}
    config[name] = {**section, **flat}
    # The whole section was written flat, or only the moved keys.
    aliases = {f"{name}.{key}": key for key in flat} if section else {name: ""}
    return config, aliases


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


def _key(error: jsonschema.ValidationError, aliases: dict[str, str]) -> str:
    """The key as the user wrote it (v1-layout keys without their section's name)."""
    key = ""
    for part in error.absolute_path:
        key += f"[{part}]" if isinstance(part, int) else (f".{part}" if key else str(part))
        if key in aliases:
            key = aliases[key]
    return key


def _expected(schema: dict) -> str:
    """What a scalar must be, in words: its type and its range."""
    kind = schema.get("type")
    if kind == "boolean":
        return "true or false"
    if kind not in ("integer", "number"):
        return {"string": "a string"}.get(kind, f"a {kind or 'value'}")
    low, high = schema.get("minimum"), schema.get("maximum")
    above, below = schema.get("exclusiveMinimum"), schema.get("exclusiveMaximum")
    if high is None and below is None and (low, above) in ((1, None), (None, 0)):
        return "a positive integer" if kind == "integer" else "a positive number"
    bounds = [f"{sign} {bound}" for sign, bound in
              (("≥", low), (">", above), ("≤", high), ("<", below)) if bound is not None]
    noun = "an integer" if kind == "integer" else "a number"
    return f"{noun} {' and '.join(bounds)}" if bounds else noun


def _fraction_hint(value: object, schema: dict) -> str:
    """A percentage given where a fraction is wanted (target_accuracy: 70 for 0.7)."""
    if (schema.get("maximum") == 1 and isinstance(value, int | float)
            and not isinstance(value, bool) and 1 < value <= 100):
        return f" (a fraction: {value / 100:g} for {value:g}%)"
    return ""


# Checks of one value (not of a list or a section): a value that fails several of them
# (1 among model names: not a string, not a name) gets one message, made from its schema.
SCALAR_CHECKS = {"type", "enum", "minimum", "maximum", "exclusiveMinimum",
                 "exclusiveMaximum", "pattern"}


def _is_scalar(error: jsonschema.ValidationError) -> bool:
    return (error.validator in SCALAR_CHECKS
            and error.schema.get("type") not in ("array", "object"))


def _one_per_key(errors: list) -> list:
    """The errors, one per scalar value (its message names every requirement)."""
    seen, kept = set(), []
    for error in errors:
        if _is_scalar(error):
            if tuple(error.absolute_path) in seen:
                continue
            seen.add(tuple(error.absolute_path))
        kept.append(error)
    return kept


def _non_finite(config: object, key: str = "") -> list[tuple[str, str]]:
    """(key, message) of every NaN or infinity: they pass every range of the schema (NaN
    compares false with all), and no setting means either."""
    if isinstance(config, dict):
        return [p for k, v in config.items()
                for p in _non_finite(v, f"{key}.{k}" if key else str(k))]
    if isinstance(config, list):
        return [p for i, v in enumerate(config) for p in _non_finite(v, f"{key}[{i}]")]
    if isinstance(config, float) and not math.isfinite(config):
        return [(key, f"config key '{key}': {config!r} is not allowed; it must be a finite "
                 "number")]
    return []


def _suggest(value: object, options: list[str], prefix: str = "") -> str:
    starts = [o for o in options if str(o).startswith(str(value))]  # 'bert' → bert-base-…
    close = starts[:1] or difflib.get_close_matches(str(value), options, n=1, cutoff=0.6)
    return f" (did you mean '{prefix}{close[0]}'?)" if close else ""


def _describe(error: jsonschema.ValidationError, aliases: dict[str, str]) -> str:
    if error.validator == "oneOf" and error.context:
        # One list, or a list per framework: name what is wrong in the form it was given in.
        given = [e for e in error.context if e.relative_schema_path[0] == (
            1 if isinstance(error.instance, dict) else 0)]
        return _describe(jsonschema.exceptions.best_match(given or error.context), aliases)
    key, value, schema = _key(error, aliases), error.instance, error.schema
    where = f"config key '{key}'" if key else "config"
    match error.validator:
        case "additionalProperties":
            allowed = list(schema["properties"])
            if not key:  # the default scenario's keys may stand at the top level (v1)
                allowed += [k for k in schema["properties"][DEFAULT_SCENARIO]["properties"]
                            if k not in allowed]
            unknown = [k for k in value if k not in allowed]
            prefix = f"{key}." if key else ""
            return "; ".join(
                f"unknown config key '{prefix}{k}'{_suggest(k, allowed, prefix)}; "
                f"allowed keys: {', '.join(prefix + a for a in allowed)}"
                for k in unknown
            )
        case _ if _is_scalar(error):
            return _scalar_problem(where, value, schema)
        case "required":
            missing = error.message.split("'")[1]
            prefix = f"{key}." if key else ""
            wanted = schema["properties"][missing]
            allowed = wanted.get("items", {}).get("enum")
            hint = f"; allowed values: {', '.join(map(str, allowed))}" if allowed else ""
            return (f"missing config key '{prefix}{missing}': "
                    f"{wanted.get('description', '')}{hint}")
        case "minItems":
            allowed = schema["items"].get("enum")
            hint = f"; allowed values: {', '.join(map(str, allowed))}" if allowed else ""
            return f"{where} is empty: give at least one value{hint}"
        case "uniqueItems":
            return f"{where}: {value!r} lists a value more than once"
        case "type" if schema.get("type") == "array":
            return f"{where}: {value!r} must be a list, for example [{_typed(value)!r}]"
        case "type" if schema.get("type") == "object":
            example = None if schema.get("required") else next(
                ((k, p["default"]) for k, p in schema.get("properties", {}).items()
                 if "default" in p), None)
            hint = f", for example {{{example[0]}: {example[1]}}}" if example else ""
            return f"{where}: {value!r} must be a mapping of keys to values{hint}"
        case _:
            return f"{where}: {error.message}"


def _scalar_problem(where: str, value: object, schema: dict) -> str:
    """One message for a bad value: what it must be (its allowed names, its form in words,
    its type and range), with the closest allowed name where one is close."""
    if "enum" in schema:
        return (f"{where}: {value!r} is not allowed{_suggest(value, schema['enum'])}; "
                f"allowed values: {', '.join(map(str, schema['enum']))}")
    if "x-expected" in schema:  # a pattern, described in words by its schema
        examples = schema.get("x-examples", [])
        close = _suggest(str(value).lower(), examples) if isinstance(value, str) else ""
        return f"{where}: {value!r} is not allowed{close}; it must be {schema['x-expected']}"
    if "pattern" in schema and isinstance(value, str):
        return (f"{where}: {value!r} has characters outside the allowed set "
                f"(regular expression {schema['pattern']})")
    return (f"{where}: {value!r} is not allowed; it must be {_expected(schema)}"
            f"{_fraction_hint(value, schema)}")
