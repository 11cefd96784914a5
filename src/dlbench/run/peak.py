"""The machine's limit: the matrix product of every library the frameworks use, per device,
precision and thread count; the peak is the best library's figure.

Each library (LIBRARIES) is measured in a process of its own (its framework's, as a cell
is): square n×n products (2·n³ FLOPs) at a few sizes where the product is bound by
arithmetic (CPU: 1024 and 2048 with up to 8 threads, 2048 and 4096 with more; GPU: 4096
and 8192), in batches of at least ~50 ms, for about `seconds` in all, holding the device's
lock like a timing cell. A library's figure is its best batch at its best size: a limit is
what the machine has been seen to do (other work on the cores only ever slows a batch);
the median batch is kept beside it. On the CPU a library first waits for a quiet machine
(dlbench.measure.quiet: no other work on its cores, Snakemake's start-up included), and
one that did not get the cores of its threads (its CPU time over the wall time) is
measured again, up to `attempts` times: a figure measured on fewer cores is *busy*, and a
busy library is never a ceiling (`combine`). The precision is the cells' own: fp32 in IEEE float32
(TF32 off), tf32 with it allowed, bf16 and fp16 in those types. A precision the device
has no native arithmetic for (the CPU's flags, the GPU's compute capability, read at run
time) is `unsupported` with the reason, as its cells are; so is a missing device.

The peak record holds every library's record, the best (`gflops`, `library`), each
framework's own default library (`framework_gemm`: the rate of the product its eager
layers reach) and, on the CPU in fp32, the theoretical peak (dlbench.measure.theoretical) with its
assumptions. Usage: `dlbench peak` measures every library, each in a child process;
`--library` measures one; `--combine` joins library records (the workflow's peak rules).
"""

import importlib
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from dlbench.catalogue.frameworks import declarations, leave_out_unused_imports
from dlbench.files import atomic, paths
from dlbench.measure import devices, env, quiet, theoretical
from dlbench.measure.timing import time_batch
from dlbench.records import result

# A CPU library that got less than this share of its threads' cores ran on a busy machine.
BUSY_SHARE = 0.9
# A busy library is measured again, at most this many times in all, each attempt after
# waiting up to QUIET_WAIT_S for the machine to be quiet.
ATTEMPTS = 3
QUIET_WAIT_S = 10.0
KIND = "gemm_peak"
BUSY = "busy"  # a peak whose every library ran on a busy machine: no ceiling
LIBRARY_KIND = "gemm_library"


@dataclass(frozen=True)
class Library:
    framework: str
    name: str  # as the report names it
    devices: tuple[str, ...]
    default: bool  # the framework's own path: what its eager layers reach


# Every registered framework's libraries (its `about` says which and why), in the
# registry's order.
LIBRARIES = {
    library.key: Library(framework.name, library.name, library.devices, library.default)
    for framework in declarations() for library in framework.gemm_libraries
}


def libraries(device: str, frameworks=None) -> list[str]:
    """The libraries measured for a device: those of `frameworks` (default: all)."""
    return [key for key, lib in LIBRARIES.items() if device in lib.devices
            and (frameworks is None or lib.framework in frameworks)]


def library_paths(device: str, precision: str, threads: int | str, frameworks) -> list[str]:
    """The library records a peak is joined from: those of `frameworks` on the device."""
    return [paths.peak_library(device, precision, threads, library)
            for library in libraries(device, frameworks)]


def default_sizes(device: str, threads: int) -> tuple[int, ...]:
    """The matrices' sides: compute-bound, a product of a few ms to a few hundred."""
    if device == "gpu":
        return (4096, 8192)
    return (1024, 2048) if threads <= 8 else (2048, 4096)


def measure_library(library: str, device: str, precision: str, threads: int,
                    seconds: float = 2.0, sizes: tuple[int, ...] | None = None,
                    attempts: int = ATTEMPTS, quiet_wait_s: float = QUIET_WAIT_S) -> dict:
    """One library's record in this process (see the module), which runs no other."""
    lib = LIBRARIES[library]
    env.set_thread_variables(threads)
    leave_out_unused_imports(lib.framework)
    from dlbench.frameworks import load_backend

    backend = load_backend(lib.framework, device, threads, 1)
    record = {"kind": LIBRARY_KIND, "library": library, "name": lib.name,
              "framework": lib.framework, "default": lib.default, "device": device,
              "precision": precision, "threads": threads, "status": "ok", "reason": None,
              "created_at": result.now(),
              # The machine's, as measured here (the join may run on another machine).
              "theoretical": _theoretical(device, precision, threads),
              "environment": env.fingerprint()}
    problem = backend.device_problem() or backend.precision_problem(precision)
    if problem:
        return record | {"status": "unsupported", "reason": problem,
                         "versions": backend.versions()}
    record["arithmetic"] = backend.set_arithmetic(precision)
    gemm = importlib.import_module(f"dlbench.frameworks.{lib.framework}.gemm")
    sizes = sizes or default_sizes(device, threads)
    cores = min(threads, os.cpu_count() or 1)
    with devices.exclusive(device) as waited:
        record["lock_wait_s"] = waited
        # The run queue before and after: other work on the cores lowers the figures.
        record["loadavg_before"] = os.getloadavg()[0]
        tries = []
        try:
            for _ in range(max(1, attempts)):
                # quiet_wait_s 0: measure at once, whatever else runs (no look, no wait).
                machine = quiet.wait_until_quiet(quiet_wait_s) \
                    if device == "cpu" and quiet_wait_s > 0 else None
                measured = [_time(gemm.product(backend, library, precision, n),
                                  backend.synchronize, n, seconds / len(sizes))
                            for n in sizes]
                best = max(measured, key=lambda s: s["best_gflops"])
                busy = device == "cpu" and best["cores_used"] < BUSY_SHARE * cores
                tries.append({"sizes": measured, "best": best, "busy": busy,
                              "quiet": machine.as_dict() if machine else None})
                if not busy:
                    break
        except Exception as exc:  # a dtype or shape the library does not do
            record |= {"status": "error", "reason": f"{type(exc).__name__}: {exc}"[:500]}
        record["loadavg_after"] = os.getloadavg()[0]
    if record["status"] == "ok":
        # The attempt that got its cores, else the fastest of the busy ones.
        kept = next((t for t in tries if not t["busy"]),
                    max(tries, key=lambda t: t["best"]["best_gflops"]))
        best = kept["best"]
        record |= {"sizes": kept["sizes"], "gflops": best["best_gflops"],
                   "median_gflops": best["median_gflops"], "size": best["size"],
                   "dtype": gemm.dtype_name(precision),
                   # At the size that gave the figure (a small product may leave a
                   # thread idle at times on a quiet machine too).
                   "busy": kept["busy"], "quiet": kept["quiet"],
                   "attempts": [{"gflops": t["best"]["best_gflops"],
                                 "cores_used": t["best"]["cores_used"],
                                 "other_load_cores": t["best"]["other_load_cores"],
                                 "busy": t["busy"], "kept": t is kept, "quiet": t["quiet"]}
                                for t in tries]}
    return record | {"versions": backend.versions()}


def _time(product, synchronize, n: int, seconds: float) -> dict:
    """Batches of n×n products for `seconds` (at least 5 batches), each batch long enough
    (~50 ms) that the synchronization after it costs nothing."""
    def batch(products: int) -> float:
        return time_batch(product, synchronize, products)

    first = batch(1)  # warm-up: the library picks its kernel, the clock ramps up
    products = max(1, round(0.05 / max(batch(1), 1e-9)))
    times, begin, cpu = [], time.perf_counter(), time.process_time()
    machine = quiet.machine_busy_s()
    while len(times) < 5 or time.perf_counter() - begin < seconds:
        times.append(batch(products) / products)
    flops, wall = 2.0 * n**3, time.perf_counter() - begin
    own = time.process_time() - cpu
    others = None if machine is None else max(
        0.0, (quiet.machine_busy_s() - machine - own) / wall)
    return {"size": n, "best_gflops": flops / min(times) / 1e9,
            "median_gflops": flops / statistics.median(times) / 1e9,
            "products_per_sample": products, "samples": len(times), "first_product_s": first,
            "seconds": wall,
            # The cores the process got (its CPU time over the wall time): fewer than its
            # threads on a CPU means other work took the cores and the figures are low.
            "cores_used": own / wall,
            # What other processes kept busy meanwhile (the machine's busy time less ours).
            "other_load_cores": None if others is None else round(others, 3)}


def combine(records: list[dict], device: str, precision: str, threads: int) -> dict:
    """The peak record: every library's record, the best one's figure and name, each
    framework's default library's figure, and the theoretical peak. A busy library (it
    never got its cores) is listed but is no ceiling: neither the peak nor a framework's
    own product; with no other, the peak's status is `busy`: no trustworthy ceiling."""
    record = {"kind": KIND, "device": device, "precision": precision, "threads": threads,
              "created_at": result.now(),
              "libraries": {r["library"]: r for r in records}}
    ok = [r for r in records if r["status"] == "ok"]
    record["busy_libraries"] = [r["library"] for r in ok if r.get("busy")]
    trusted = [r for r in ok if not r.get("busy")]
    record["framework_gemm"] = {r["framework"]: {"library": r["library"], "gflops": r["gflops"]}
                                for r in trusted if r["default"]}
    if trusted:
        best = max(trusted, key=lambda r: r["gflops"])
        record |= {"status": "ok", "reason": None, "gflops": best["gflops"],
                   "library": best["library"], "library_name": best["name"],
                   "size": best["size"], "dtype": best["dtype"]}
    elif ok:
        record |= {"status": BUSY, "reason": (
            "no trustworthy ceiling: every library ran on a busy machine (fewer cores than "
            "its threads, after " + ", ".join(
                f"{len(r.get('attempts') or [1])} attempt(s) of {r['library']}" for r in ok)
            + "); measure it again on a quiet machine (delete results/peak/)")}
    else:
        statuses = {r["status"] for r in records}
        record |= {"status": "unsupported" if statuses == {"unsupported"} else "error",
                   "reason": "; ".join(f"{r['library']}: {r['reason']}" for r in records)
                   or "no library measured"}
    # The measuring machine's (the library jobs ran there; this join may run elsewhere).
    measured_on = next((r for r in records if "environment" in r), {})
    theory = dict(measured_on.get("theoretical") or _theoretical(device, precision, threads))
    record["theoretical"] = theory
    if theory["gflops"] and record.get("gflops", 0) > theory["gflops"]:
        # Above the theoretical figure: the clock read was not the clock the cores ran
        # at (a VM's nominal clock), or the FMA units' count is wrong.
        theory["measured_above"] = (
            f"the measured {record['gflops']:.1f} GFLOP/s is above it: the cores ran at "
            f"≥ {theory['clock_mhz'] * record['gflops'] / theory['gflops']:,.0f} MHz, or "
            "the assumptions are wrong")
    return record | {"environment": measured_on.get("environment") or env.fingerprint()}


def _theoretical(device: str, precision: str, threads: int) -> dict:
    if device == "cpu" and precision == "fp32":
        return theoretical.read_cpu_fp32(threads)
    return {"gflops": None, "label": "unknown",
            "reason": "modelled for float32 on the CPU only"}


def measure(device: str, precision: str, threads: int, seconds: float = 2.0,
            sizes: tuple[int, ...] | None = None, which: list[str] | None = None,
            attempts: int = ATTEMPTS, quiet_wait_s: float = QUIET_WAIT_S) -> dict:
    """The peak record, each library measured in a child process of its own (so that one
    framework's threads and allocations do not sit beside another's)."""
    records = []
    with tempfile.TemporaryDirectory() as folder:
        for library in which or libraries(device):
            out = Path(folder) / f"{library}.json"
            args = [sys.executable, "-m", "dlbench", "peak", f"--device={device}",
                    f"--precision={precision}", f"--threads={threads}", f"--out={out}",
                    f"--library={library}", f"--seconds={seconds}",
                    f"--attempts={attempts}", f"--quiet-wait-s={quiet_wait_s}"]
            args += [f"--size={n}" for n in sizes or ()]
            run = subprocess.run(args, capture_output=True, text=True)
            if run.returncode == 0:
                records.append(result.read_json(out))
            else:
                records.append({"library": library, **_about(library), "status": "error",
                                "reason": run.stderr.strip().splitlines()[-1][:500]
                                if run.stderr.strip() else f"exit {run.returncode}"})
    return combine(records, device, precision, threads)


def _about(library: str) -> dict:
    lib = LIBRARIES[library]
    return {"name": lib.name, "framework": lib.framework, "default": lib.default}


def describe(record: dict) -> str:
    """The figure and the library that reached it, or why there is none; one line per
    library record."""
    name = f"{record['device']} {record['precision']} ×{record['threads']} threads"
    if record.get("kind") == LIBRARY_KIND:
        name += f" {record['library']}"
    if record["status"] != "ok":
        return f"{name}: {record['status']} ({record['reason']})"
    text = f"{name}: {record['gflops']:.1f} GFLOP/s"
    if record.get("kind") == LIBRARY_KIND:
        tries = record.get("attempts") or []
        cores = next((t["cores_used"] for t in tries if t["kept"]), None)
        return text + f" (median {record['median_gflops']:.1f}; {record['size']}² " \
                      f"{record['dtype']} products" + (
                          f"; {cores:.2f} cores, {len(tries)} attempt(s)" if cores else "") \
            + ("; BUSY: fewer cores than its threads, not a ceiling)" if record.get("busy")
               else ")")
    others = ", ".join(f"{key} {r['gflops']:.1f}" + (" busy" if r.get("busy") else "")
                       if r["status"] == "ok" else f"{key} {r['status']}"
                       for key, r in record["libraries"].items())
    theory = record["theoretical"]
    limit = (f"{theory['gflops']:.1f} {theory['label']}" if theory["gflops"]
             else "unknown")
    return f"{text} by {record['library']} ({others}; theoretical {limit})"


def write(device: str, precision: str, threads: int, out: Path, seconds: float,
          sizes: list[int] | None, library: str | None = None,
          which: list[str] | None = None, combined: list[Path] | None = None,
          attempts: int = ATTEMPTS, quiet_wait_s: float = QUIET_WAIT_S) -> dict:
    """`dlbench peak`: one library's record (`library`), the peak joined from library
    records (`combined`), or the peak measured (`which` libraries, default all)."""
    sizes = tuple(sizes) if sizes else None
    if library:
        record = measure_library(library, device, precision, threads, seconds, sizes,
                                 attempts, quiet_wait_s)
    elif combined:
        record = combine([result.read_json(path) for path in combined], device, precision,
                         threads)
    else:
        record = measure(device, precision, threads, seconds, sizes, which, attempts,
                         quiet_wait_s)
    atomic.write_json_atomic(out, record)
    return record
