"""One run at a time on a results folder.

Snakemake's own lock (.snakemake/locks) lives in the working directory and covers only the
files of the two runs' plans; it does not see a second working directory whose results/ is
the same folder (a link, a shared mount), nor a run with --nolock, nor one started after
--unlock, which its own message advises. Two such runs measure the same cells at once and
delete each other's files. The workflow therefore holds this lock, a file in the results
folder, from its start to its end (the Snakefile's onstart, onsuccess and onerror).

The lock is an flock on the file, so the kernel releases it when its holder dies (kill -9,
a crash): a lock left behind never blocks the next run. The file says who holds it, for the
message of a run that is refused.
"""

import fcntl
import json
import os
import socket
import sys
from pathlib import Path
from typing import IO

from dlbench.records.result import now


class ResultsFolderBusy(RuntimeError):
    """Another run holds the results folder; the message names it."""


def acquire(lock_file: Path) -> IO[str]:
    """Take the lock, or raise ResultsFolderBusy naming the run that holds it. Keep the
    returned handle open for as long as the run lasts."""
    lock_file.parent.mkdir(parents=True, exist_ok=True)
    handle = open(lock_file, "a+")  # not truncated: the holder's details stay readable
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.seek(0)
        holder = handle.read()
        handle.close()
        raise ResultsFolderBusy(busy_message(lock_file, holder)) from None
    # A file left by a run that died says so no more: it now names this run.
    handle.truncate(0)
    try:
        handle.write(json.dumps(holder_details()))
        handle.flush()
    except OSError:  # a full disk: the lock holds all the same, without its details
        pass
    return handle


def release(handle: IO[str] | None) -> None:
    """Release the lock (closing the file releases the flock). The file stays: removing it
    would let a run that opened it just before take a lock on a file no longer there."""
    if handle is not None and not handle.closed:
        handle.truncate(0)
        handle.close()


def holder_details() -> dict:
    return {"pid": os.getpid(), "host": socket.gethostname(), "started_at": now(),
            "command": " ".join(sys.argv)}


def busy_message(lock_file: Path, holder: str) -> str:
    folder = lock_file.parent.resolve()
    try:
        details = json.loads(holder)
        who = (f"process {details['pid']} on {details['host']}, started at "
               f"{details['started_at']}: {details['command']}")
    except (ValueError, KeyError, TypeError):  # the holder has not written its details yet
        who = "another process"
    return (f"dlbench: the results folder {folder} is in use by another run ({who}). "
            "Two runs on one results folder would measure the same cells at once and "
            "delete each other's files: wait for that run to finish, or stop it. Its lock, "
            f"{lock_file.resolve()}, is released when it ends, even if it is killed.")
