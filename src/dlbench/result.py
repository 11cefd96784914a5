"""The result record of one cell: its schema version, validation and atomic writing."""

import contextlib
import hashlib
import json
import os
import tempfile
from collections.abc import Iterator
from datetime import UTC, datetime
from functools import cache
from pathlib import Path

import jsonschema

from dlbench import SCHEMA_DIR

SCHEMA_VERSION = 1
SCHEMA_PATH = SCHEMA_DIR / "result.schema.json"
STATUSES = ("ok", "oom", "unsupported", "error")
_UMASK = os.umask(0)
os.umask(_UMASK)


class ResultError(ValueError):
    """A result file that cannot be used; the message names the file."""


def now(unix_time: float | None = None) -> str:
    """An ISO timestamp of now, or of a given Unix time."""
    moment = datetime.now(UTC) if unix_time is None else datetime.fromtimestamp(unix_time, UTC)
    return moment.isoformat(timespec="milliseconds")


def params_hash(params: dict) -> str:
    return hashlib.sha256(json.dumps(params, sort_keys=True).encode()).hexdigest()[:16]


def write_json_atomic(path: str | Path, data: dict) -> None:
    """Write JSON so that the path holds either nothing or the whole file, never a part."""
    write_text_atomic(path, json.dumps(data, indent=1))


def write_text_atomic(path: str | Path, text: str) -> None:
    with replacing(path) as tmp, open(tmp, "w") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())


@contextlib.contextmanager
def replacing(path: str | Path) -> Iterator[Path]:
    """A temporary path beside `path`, renamed over it (atomically) if the block succeeds."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.close(fd)
    os.chmod(tmp, 0o666 & ~_UMASK)  # as a plain open() would: mkstemp makes it private
    try:
        yield Path(tmp)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


@cache
def _validator() -> jsonschema.Draft202012Validator:
    return jsonschema.Draft202012Validator(json.loads(SCHEMA_PATH.read_text()))


def validate(result: dict) -> None:
    """Raise ValueError describing the first problem of a result record."""
    error = jsonschema.exceptions.best_match(_validator().iter_errors(result))
    if error is not None:
        where = "/".join(map(str, error.absolute_path)) or "(top level)"
        raise ValueError(f"at {where}: {error.message}")


def read_json(path: str | Path) -> dict:
    """A record as written, not validated (a measuring child's, completed afterwards)."""
    return json.loads(Path(path).read_text())


def read(path: str | Path) -> dict:
    """A validated result; ResultError naming the file and the problem otherwise."""
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
    if version != SCHEMA_VERSION:
        raise ResultError(
            f"{path}: schema version {version!r}, this dlbench reads version {SCHEMA_VERSION}; "
            "delete the file to re-measure the cell"
        )
    try:
        validate(result)
    except ValueError as exc:
        raise ResultError(f"{path}: does not match {SCHEMA_PATH.name} {exc}") from None
    return result
