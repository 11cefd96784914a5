"""Planted faults, for the tests of dlbench's own fault handling (and a starved input
pipeline, for the tests of the bottleneck verdict).

Only the environment variable DLBENCH_TEST_FAULT turns one on (no config key reaches
this): "<kind>" for every measured cell, or "<kind>@<regex>" for the cells whose id
matches. Kinds: raise, oom (allocate without limit), crash (segfault), kill (SIGKILL),
hang (sleep past any time limit), hold (wait, without using the CPU, until the file named
by DLBENCH_TEST_RELEASE exists, then measure as usual: a run kept busy for as long as a
test needs); and faults of a training cell's input pipeline, which
strike when it has read a few batches of images (LOADER_IMAGES): kill-loader (a PyTorch
DataLoader worker SIGKILLs itself), oom-loader (a DataLoader worker allocates until the
supervisor's memory guard stops the cell), vanish-file and corrupt-file (TensorFlow: the
next training file to be read is deleted, or overwritten with bytes that are no PNG);
and wrong-cache, a fault of a generation cell's key-value cache (PyTorch): after the
forward pass that made the token before the middle of the new ones, the cached values of
every layer are multiplied by CACHE_SCALE (a cache written with the wrong sign and scale),
so that the next tokens attend to a wrong cache — a wrong answer that the token check must
catch (milder corruptions — the prompt's keys and values zeroed, the batch's rows
swapped — left tiny-gpt2's greedy tokens unchanged: its random weights make attention's
share of the logits small); and faults of the timed loop: slow (every timed iteration
spins SLOW_S more on the CPU: a planted slower recipe), and, measured side by side,
stolen (the host is said to have stolen all of the first slice of every timed loop: a
burst of steal) and stolen-always (every slice: a host that keeps stealing).
"""

import ctypes
import os
import re
import signal
import time

VARIABLE = "DLBENCH_TEST_FAULT"
KINDS = ("raise", "oom", "crash", "kill", "hang", "hold")
RELEASE_VARIABLE = "DLBENCH_TEST_RELEASE"  # the file that ends a hold
# Done by the cell's input pipeline, not at the cell's start: inject() only arms them.
PIPELINE_KINDS = ("kill-loader", "oom-loader", "vanish-file", "corrupt-file")
# Done by a generation cell's decoding loop: armed the same way.
GENERATION_KINDS = ("wrong-cache",)
# Done by the timed loop: each timed iteration spins SLOW_S more on the CPU (a slower side
# of a comparison, which must come out slower by that much and alone).
TIMING_KINDS = ("slow", "stolen", "stolen-always")
SLOW_S = 0.002
# wrong-cache: what the cached values are multiplied by.
CACHE_SCALE = -100.0
# A pipeline fault strikes at this image: a few batches into the first epoch.
LOADER_IMAGES = 64
# oom-loader stops allocating here (and waits), so that a guard that missed the loader
# workers ends the cell by its time limit instead of taking the machine's memory.
LOADER_HOARD_CAP_MB = 4096
# A starved input pipeline: PyTorch's image decoding sleeps this many milliseconds per image.
DECODE_DELAY_VARIABLE = "DLBENCH_TEST_DECODE_DELAY_MS"


class PlantedFault(RuntimeError):
    """The exception of the `raise` fault."""


_armed: str | None = None  # the pipeline fault of the cell being measured
_files_opened = 0  # by its pipeline, for vanish-file and corrupt-file


def inject(cell_id: str) -> None:
    """Do the planted fault if one is asked for this cell (arm it, for a pipeline fault);
    otherwise nothing."""
    global _armed, _files_opened
    _armed, _files_opened = None, 0
    spec = os.environ.get(VARIABLE)
    if not spec:
        return
    kind, _, pattern = spec.partition("@")
    if pattern and not re.fullmatch(pattern, cell_id):
        return
    if kind in PIPELINE_KINDS + GENERATION_KINDS + TIMING_KINDS:
        _armed = kind
        return
    if kind == "raise":
        raise PlantedFault(f"planted fault in {cell_id}")
    if kind == "oom":
        hoard = []
        while True:  # touch every page, so that the memory is really resident
            hoard.append(b"\x01" * (64 << 20))
    if kind == "crash":
        ctypes.string_at(0)  # reads address 0: SIGSEGV
    if kind == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
    if kind == "hang":
        time.sleep(10**6)
    if kind == "hold":
        release = os.environ.get(RELEASE_VARIABLE)
        if not release:
            raise ValueError(f"{VARIABLE}=hold needs {RELEASE_VARIABLE}: the file that ends it")
        while not os.path.exists(release):
            time.sleep(0.1)
        return
    known = ", ".join(KINDS + PIPELINE_KINDS + GENERATION_KINDS + TIMING_KINDS)
    raise ValueError(f"{VARIABLE}={spec!r}: unknown fault kind; known: {known}")


def pipeline_fault() -> str | None:
    """The pipeline fault armed for the cell being measured, if any."""
    return _armed if _armed in PIPELINE_KINDS else None


def generation_fault() -> str | None:
    """The generation fault armed for the cell being measured, if any."""
    return _armed if _armed in GENERATION_KINDS else None


def planted_delay_s() -> float:
    """The seconds the `slow` fault adds to each timed iteration of the cell (0 if none)."""
    return SLOW_S if _armed == "slow" else 0.0


def planted_steal(slice_index: int) -> float:
    """The share of a timed slice (the loop's 0th, 1st, …) that the `stolen` faults say the
    host stole (0 if none)."""
    if _armed == "stolen-always" or (_armed == "stolen" and slice_index == 0):
        return 1.0
    return 0.0


def corrupt_cache(cache) -> None:
    """wrong-cache: multiply the cached values of every layer of a transformers key-value
    cache (dynamic or static) by CACHE_SCALE, in place."""
    for layer in cache.layers:
        layer.values.mul_(CACHE_SCALE)


def in_loader_worker(kind: str, images_read: int) -> None:
    """A loader worker process's part of kill-loader and oom-loader: strike once it has
    read LOADER_IMAGES images."""
    if images_read <= LOADER_IMAGES:
        return
    if kind == "kill-loader":
        os.kill(os.getpid(), signal.SIGKILL)
    if kind == "oom-loader":
        _hoard = [b"\x01" * (64 << 20) for _ in range(LOADER_HOARD_CAP_MB // 64)]
        time.sleep(10**6)


def spoil_file(kind: str, path: bytes) -> bytes:
    """vanish-file and corrupt-file: called with each file the pipeline is about to read
    (from any of its threads); spoils the LOADER_IMAGES + 1-th."""
    global _files_opened
    _files_opened += 1
    if _files_opened == LOADER_IMAGES + 1:
        if kind == "vanish-file":
            os.remove(path)
        elif kind == "corrupt-file":
            with open(path, "wb") as file:
                file.write(b"this is no PNG image")
    return path


def decode_delay_s() -> float:
    """The planted delay of decoding one image, in seconds (0 unless a test asks)."""
    return float(os.environ.get(DECODE_DELAY_VARIABLE) or 0) / 1e3
