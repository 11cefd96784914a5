"""The environment fingerprint written into every result."""

import hashlib
import json
import os
import platform
import socket
import subprocess
from functools import cache
from importlib import metadata

from dlbench import REPO_ROOT, __version__
from dlbench.catalogue import frameworks

# Every registered framework's packages, then those the harness shares.
LIBRARIES = (*(package for framework in frameworks.declarations()
               for package in framework.distributions),
             "transformers", "numpy", "snakemake")
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


def version(package: str) -> str | None:
    """An installed distribution's version (None: not installed)."""
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


def _read(path: str) -> str | None:
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError:
        return None


def _cpu_frequency() -> dict:
    """The frequency governor, limits and turbo state, where the kernel exposes them (not
    inside most virtual machines): 'powersave', a low cap or turbo on one run and off on
    another skews every timing."""
    cpufreq = "/sys/devices/system/cpu/cpu0/cpufreq/"
    max_khz = _read(cpufreq + "cpuinfo_max_freq")
    # intel_pstate says no_turbo (1: off); acpi-cpufreq and amd-pstate say boost (1: on).
    no_turbo = _read("/sys/devices/system/cpu/intel_pstate/no_turbo")
    boost = _read("/sys/devices/system/cpu/cpufreq/boost")
    turbo = (no_turbo == "0") if no_turbo in ("0", "1") else (
        boost == "1" if boost in ("0", "1") else None)
    return {"governor": _read(cpufreq + "scaling_governor"),
            "max_mhz": int(max_khz) // 1000 if max_khz and max_khz.isdigit() else None,
            "boost": turbo}


@cache
def gpus() -> list[dict]:
    """NVIDIA GPUs as the driver reports them (NVML); empty without a driver."""
    try:
        import pynvml

        pynvml.nvmlInit()
    except Exception:
        return []
    try:
        driver, cuda = pynvml.nvmlSystemGetDriverVersion(), pynvml.nvmlSystemGetCudaDriverVersion()
        found = []
        for index in range(pynvml.nvmlDeviceGetCount()):
            handle = pynvml.nvmlDeviceGetHandleByIndex(index)
            found.append({
                "name": pynvml.nvmlDeviceGetName(handle),
                "memory_gib": round(pynvml.nvmlDeviceGetMemoryInfo(handle).total / 2**30, 1),
                "driver": driver,
                "cuda_driver": f"{cuda // 1000}.{cuda % 1000 // 10}",
                "sm_clock_max_mhz": pynvml.nvmlDeviceGetMaxClockInfo(
                    handle, pynvml.NVML_CLOCK_SM),
                "power_limit_w": pynvml.nvmlDeviceGetPowerManagementLimit(handle) / 1000,
            })
        return found
    finally:
        pynvml.nvmlShutdown()


@cache
def packages_hash() -> str:
    """A hash of every installed distribution and version: same hash, same software."""
    names = sorted(_name_and_version(d) for d in metadata.distributions())
    return hashlib.sha256("\n".join(names).encode()).hexdigest()[:16]


def _name_and_version(distribution: metadata.Distribution) -> str:
    """'Name==Version' from the metadata's head: what `d.metadata['Name']` and `d.version`
    say, without parsing the whole file as an e-mail (10x slower: 0.09 s of every cell's
    start for ~190 distributions here)."""
    text = (distribution.read_text("METADATA") or distribution.read_text("PKG-INFO")
            or distribution.read_text("") or "")  # the last: a one-file .egg-info
    head: dict[str, str] = {}
    for line in text.splitlines():
        if not line:  # the headers end at the first empty line
            break
        key, _, value = line.partition(":")
        head.setdefault(key.strip().lower(), value.strip())  # header names: any case
    return f"{head.get('name')}=={head.get('version')}"


# The whole environment: the hardware and the software, not the host's name.
_COMPARABLE = ("cpu_model", "logical_cpus", "usable_cpus", "ram_gib", "cpu_frequency", "gpus",
               "python", "dlbench", "packages_hash")
# What makes timings comparable across environments: the hardware and its driver. (The
# libraries on each cell's measured path are in its `details`; two environments, one per
# framework, differ in their other packages by design.)
_HARDWARE = ("cpu_model", "logical_cpus", "usable_cpus", "cpu_frequency", "gpus")


def fingerprint() -> dict:
    found = {
        "hostname": socket.gethostname(),
        "os": platform.platform(),
        "cpu_model": _cpu_model(),
        "logical_cpus": os.cpu_count(),
        "usable_cpus": len(os.sched_getaffinity(0)),
        "ram_gib": _ram_gib(),
        "cpu_frequency": _cpu_frequency(),
        "gpus": gpus(),
        "python": platform.python_version(),
        "dlbench": __version__,
        "libraries": {name: version(name) for name in LIBRARIES},
        "packages_hash": packages_hash(),
        "git": git_state(),
    }
    comparable = json.dumps({key: found[key] for key in _COMPARABLE}, sort_keys=True)
    found["fingerprint"] = hashlib.sha256(comparable.encode()).hexdigest()[:12]
    hardware = json.dumps({key: found[key] for key in _HARDWARE}, sort_keys=True)
    found["hardware_fingerprint"] = hashlib.sha256(hardware.encode()).hexdigest()[:12]
    return found


def set_thread_variables(threads: int) -> None:
    """Set the thread pools' variables, which they read when a framework loads: before the
    import, so that Snakemake's values do not win."""
    for name in THREAD_VARIABLES:
        os.environ[name] = str(threads)


def thread_variables() -> dict[str, str | None]:
    return {name: os.environ.get(name) for name in THREAD_VARIABLES}
