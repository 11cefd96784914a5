"""Planted faults, for the tests of dlbench's own fault handling (and a starved input
pipeline, for the tests of the bottleneck verdict).

Only the environment variable DLBENCH_TEST_FAULT turns one on (no config key reaches
this): "<kind>" for every measured cell, or "<kind>@<regex>" for the cells whose id
matches. Kinds: raise, oom (allocate without limit), crash (segfault), kill (SIGKILL),
hang (sleep past any time limit).
"""

import ctypes
import os
import re
import signal
import time

VARIABLE = "DLBENCH_TEST_FAULT"
KINDS = ("raise", "oom", "crash", "kill", "hang")
# A starved input pipeline: PyTorch's image decoding sleeps this many milliseconds per image.
DECODE_DELAY_VARIABLE = "DLBENCH_TEST_DECODE_DELAY_MS"


class PlantedFault(RuntimeError):
    """The exception of the `raise` fault."""


def inject(cell_id: str) -> None:
    """Do the planted fault if one is asked for this cell; otherwise nothing."""
    spec = os.environ.get(VARIABLE)
    if not spec:
        return
    kind, _, pattern = spec.partition("@")
    if pattern and not re.fullmatch(pattern, cell_id):
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
    raise ValueError(f"{VARIABLE}={spec!r}: unknown fault kind; known: {', '.join(KINDS)}")


def decode_delay_s() -> float:
    """The planted delay of decoding one image, in seconds (0 unless a test asks)."""
    return float(os.environ.get(DECODE_DELAY_VARIABLE) or 0) / 1e3
