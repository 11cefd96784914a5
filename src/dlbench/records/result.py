"""The result record of one cell: its schema (the shared part and each scenario's),
validation and reading (version 1 files too); it is written atomically
(dlbench.files.atomic)."""

import hashlib
import json
from datetime import UTC, datetime
from functools import cache
from pathlib import Path

import jsonschema

from dlbench import SCHEMA_DIR, scenarios

SCHEMA_VERSION = 2
SCHEMA_PATH = SCHEMA_DIR / "result.schema.json"
# Results written before scenarios existed: validated as they are, then read as inference.
V1_SCHEMA_PATH = SCHEMA_DIR / "result.v1.schema.json"
STATUSES = ("ok", "oom", "unsupported", "error")


class ResultError(ValueError):
    """A result file that cannot be used; the message names the file."""


def now(unix_time: float | None = None) -> str:
    """An ISO timestamp of now, or of a given Unix time."""
    moment = datetime.now(UTC) if unix_time is None else datetime.fromtimestamp(unix_time, UTC)
    return moment.isoformat(timespec="milliseconds")


def params_hash(params: dict) -> str:
    return hashlib.sha256(json.dumps(params, sort_keys=True).encode()).hexdigest()[:16]


def schema() -> dict:
    """The result schema: the shared part, with each registered scenario's composed in
    (its size axes in `params`, its sections where `params.scenario` names it)."""
    composed = json.loads(SCHEMA_PATH.read_text())
    params = composed["properties"]["params"]
    registered = scenarios.scenarios()
    params["properties"]["scenario"] = {"enum": list(registered)}
    params["allOf"], composed["allOf"] = [], []
    for name, scenario in registered.items():
        part = scenario.result_schema()
        when = {"properties": {"scenario": {"const": name}}}
        params["allOf"].append({"if": when, "then": {
            "properties": part["params"], "required": list(part["params"])}})
        sections = {"properties": part["properties"]}
        ok = part.get("ok_requires", [])
        if ok:
            sections["if"] = {"properties": {"status": {"const": "ok"}}}
            sections["then"] = {"required": ok, "properties": {k: {"type": "object"} for k in ok}}
        composed["allOf"].append({"if": {"properties": {"params": when}}, "then": sections})
    return composed


@cache
def _validator() -> jsonschema.Draft202012Validator:
    return jsonschema.Draft202012Validator(schema())


@cache
def _v1_validator() -> jsonschema.Draft202012Validator:
    return jsonschema.Draft202012Validator(json.loads(V1_SCHEMA_PATH.read_text()))


def validate(result: dict) -> None:
    """Raise ValueError describing the first problem of a result record."""
    _first_problem(_validator(), result)


def _first_problem(validator: jsonschema.Draft202012Validator, result: dict) -> None:
    error = jsonschema.exceptions.best_match(validator.iter_errors(result))
    if error is not None:
        where = "/".join(map(str, error.absolute_path)) or "(top level)"
        raise ValueError(f"at {where}: {error.message}")


def read_json(path: str | Path) -> dict:
    """A record as written, not validated (a measuring child's, completed afterwards)."""
    return json.loads(Path(path).read_text())


def upgrade_v1(result: dict) -> dict:
    """A version 1 result as version 2: an inference cell (only inference existed then)."""
    return {**result, "schema_version": SCHEMA_VERSION,
            "params": {"scenario": "inference", **result["params"]}}


def read(path: str | Path) -> dict:
    """A validated result (version 1 files are validated as written, then upgraded);
    ResultError naming the file and the problem otherwise."""
    path = Path(path)
    try:
        result = json.loads(path.read_text())
    except FileNotFoundError:
        raise ResultError(f"{path}: result file is missing") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ResultError(f"{path}: not valid JSON ({exc})") from None
    if not isinstance(result, dict):
        raise ResultError(f"{path}: not a result record (expected a JSON object)")
    version = result.get("schema_version")
    validator, schema_file = {1: (_v1_validator, V1_SCHEMA_PATH),
                              SCHEMA_VERSION: (_validator, SCHEMA_PATH)}.get(version, (None, None))
    if validator is None:
        raise ResultError(
            f"{path}: schema version {version!r}, this dlbench reads versions 1 and "
            f"{SCHEMA_VERSION}; delete the file to re-measure the cell"
        )
    try:
        _first_problem(validator(), result)
    except ValueError as exc:
        raise ResultError(f"{path}: does not match {schema_file.name} {exc}") from None
    return upgrade_v1(result) if version == 1 else result
