"""The compilers' caches of a measuring job in rounds (measurement.rounds): made empty for its
first round and kept for its later ones, so that a compiled recipe compiles cold once, as a
user's first run does — the cell's compile time is its first round's — and its later
rounds load what the first compiled instead of paying the compilation again: the same
programs, found in the cache (torch.compile's Inductor and FX-graph caches, JAX's
persistent compilation cache, TensorFlow XLA's persistent cache).

The job sets the environment before it starts its measuring processes; each framework's
backend reads it (`CACHE`: the folder; `WARM`: whether an earlier round filled it) and
every result says which its compilation was (`process.compile_cache`).
"""

import os
import shutil
from pathlib import Path

from dlbench.files import paths

CACHE = "DLBENCH_COMPILE_CACHE"
WARM = "DLBENCH_COMPILE_CACHE_WARM"


def prepare(unit: str, round_: int) -> Path:
    """The job's cache folder: emptied in its first round, kept after; the environment of
    its measuring processes names it."""
    folder = Path(paths.compile_cache(unit)).resolve()
    if round_ == 0:
        shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True, exist_ok=True)
    os.environ[CACHE] = str(folder)
    os.environ[WARM] = "1" if round_ > 0 else "0"
    return folder


def folder(framework: str) -> Path | None:
    """A framework's part of the job's cache (None outside rounds: each cell compiles into
    a cache of its own, removed after it)."""
    root = os.environ.get(CACHE)
    if not root:
        return None
    path = Path(root) / framework
    path.mkdir(parents=True, exist_ok=True)
    return path


def state() -> str:
    """What a cell's compilation found: 'kept' (an earlier round's), 'empty' (the first
    round's, cold), 'none' (outside rounds: a fresh cache of its own)."""
    if not os.environ.get(CACHE):
        return "none"
    return "kept" if os.environ.get(WARM) == "1" else "empty"
