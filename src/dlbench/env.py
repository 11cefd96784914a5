"""The environment fingerprint written into every result."""

import os
import platform
import socket
import subprocess
from functools import cache
from importlib import metadata

from dlbench import REPO_ROOT, __version__

LIBRARIES = ("torch", "tensorflow", "tf-keras", "transformers", "numpy", "snakemake")
THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _ram_gib() -> float | None:
    try:
        return round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1)
    except (ValueError, OSError):
        return None


def _version(package: str) -> str | None:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None


@cache
def git_state() -> dict:
    """dlbench's commit and whether its tree had uncommitted changes."""

    def git(*args: str) -> str:
        return subprocess.run(
            ["git", "-C", str(REPO_ROOT), *args], capture_output=True, text=True, check=True,
            timeout=10,
        ).stdout.strip()

    try:
        return {
            "commit": git("rev-parse", "HEAD"),
            "dirty": bool(git("status", "--porcelain", "--untracked-files=no")),
        }
    except (OSError, subprocess.SubprocessError):
        return {"commit": None, "dirty": None}


def fingerprint() -> dict:
    return {
        "hostname": socket.gethostname(),
        "os": platform.platform(),
        "cpu_model": _cpu_model(),
        "logical_cpus": os.cpu_count(),
        "usable_cpus": len(os.sched_getaffinity(0)),
        "ram_gib": _ram_gib(),
        "python": platform.python_version(),
        "dlbench": __version__,
        "libraries": {name: _version(name) for name in LIBRARIES},
        "git": git_state(),
    }


def thread_variables() -> dict[str, str | None]:
    return {name: os.environ.get(name) for name in THREAD_VARIABLES}
