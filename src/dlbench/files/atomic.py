"""How a file is written: whole or not at all (a temporary file beside it, renamed over
it), with the mode a plain open() would give it, and a full disk named with the file that
could not be written."""

import contextlib
import errno
import json
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path


class DiskFull(OSError):
    """A file could not be written for want of space (the device, a quota, a file size
    limit); the message names the file."""


# ENOSPC: the device is full; EDQUOT: the user's quota; EFBIG: a file size limit (ulimit -f).
DISK_FULL_ERRNOS = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)


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
    """A temporary path beside `path`, renamed over it (atomically) if the block succeeds:
    if it fails (the disk full, an interruption), `path` keeps its previous content whole."""
    path = Path(path)
    with naming_a_full_disk(path):
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.close(fd)
    os.chmod(tmp, default_file_mode())  # as a plain open() would: mkstemp makes it private
    try:
        with naming_a_full_disk(path):
            yield Path(tmp)
            os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)  # frees the space it took
        raise


@contextlib.contextmanager
def naming_a_full_disk(path: Path, atomic: bool = True) -> Iterator[None]:
    """Turn a full disk's OSError, which names no file (or only a temporary one), into
    DiskFull naming `path`; `atomic`: whether `path` is written by `replacing`."""
    try:
        yield
    except DiskFull:
        raise
    except OSError as error:
        if error.errno not in DISK_FULL_ERRNOS:
            raise
        raise disk_full(error.errno, path, atomic) from error


def disk_full(code: int, path: Path, atomic: bool = True) -> DiskFull:
    """The DiskFull of `path` for one of DISK_FULL_ERRNOS."""
    kept = ("it was not written, and an earlier version of it is kept whole" if atomic
            else "it is left incomplete")
    full = DiskFull(f"{os.strerror(code).lower()} while writing {path}: {kept}. Free some "
                    "space and run again.")
    full.errno = code
    return full


def default_file_mode() -> int:
    """The mode a plain open() gives a new file: 0o666 less this process's umask, read from
    /proc (setting the umask to read it would change it for every thread meanwhile)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return 0o666 & ~int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    return 0o644
