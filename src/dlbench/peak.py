"""The machine's limit: a short GEMM benchmark per device, precision and thread count.

PyTorch multiplies two square n×n matrices (2·n³ FLOPs, n large enough that the product is
bound by arithmetic, not memory: 2048 on a CPU with up to 8 threads, 4096 with more, 8192
on a GPU) over and over for about `seconds`, holding the device's lock like a timing cell;
the median rate is the peak the report measures the cells against. The precision is the
cells' own: fp32 in IEEE float32 (TF32 off), tf32 with it allowed, bf16 and fp16 in those
types. A precision the device has no native arithmetic for (the CPU's feature flags, the
GPU's compute capability, read at run time) is recorded as `unsupported` with the reason,
as its cells are; so is a device that is not there. Usage: `dlbench peak` (the workflow's
peak rule, which keeps the file: it is measured once, not once per report).
"""

import os
import statistics
import time
from pathlib import Path

from dlbench import devices, env, result

FOLDER = "results/peak"
KIND = "gemm_peak"


def peak_path(device: str, precision: str, threads: int) -> str:
    """Where the workflow keeps the peak of a device, precision and thread count."""
    return f"{FOLDER}/{device}_{precision}_t{threads}.json"


def default_size(device: str, threads: int) -> int:
    """The matrices' side: compute-bound, a product of a few ms to a few hundred."""
    if device == "gpu":
        return 8192
    return 2048 if threads <= 8 else 4096


def measure(device: str, precision: str, threads: int, seconds: float = 1.5,
            size: int | None = None) -> dict:
    """The peak record of a device, precision and thread count (see the module)."""
    env.set_thread_variables(threads)
    from dlbench.frameworks import load_backend

    backend = load_backend("pytorch", device, threads, 1)
    record = {"kind": KIND, "device": device, "precision": precision, "threads": threads,
              "status": "ok", "reason": None, "created_at": result.now()}
    problem = backend.device_problem() or backend.precision_problem(precision)
    if problem:
        return record | {"status": "unsupported", "reason": problem,
                         "environment": env.fingerprint()}
    record["arithmetic"] = backend.set_arithmetic(precision)
    with devices.exclusive(device) as waited:
        record["lock_wait_s"] = waited
        # The run queue before and after: other work on the cores lowers the figure.
        record["loadavg_before"] = os.getloadavg()[0]
        record |= _gemm(backend, precision, size or default_size(device, threads), seconds)
        record["loadavg_after"] = os.getloadavg()[0]
    return record | {"libraries": backend.versions(), "environment": env.fingerprint()}


def _gemm(backend, precision: str, n: int, seconds: float) -> dict:
    """Time batches of n×n products until `seconds` have passed (at least 5 batches), each
    batch long enough (~50 ms) that the synchronization after it costs nothing."""
    import torch

    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(precision, torch.float32)
    generator = torch.Generator().manual_seed(0)
    a, b = (torch.randn(n, n, generator=generator).to(backend.device, dtype) for _ in "ab")
    out = torch.empty(n, n, dtype=dtype, device=backend.device)

    def batch(products: int) -> float:
        start = time.perf_counter()
        for _ in range(products):
            torch.matmul(a, b, out=out)
        backend.synchronize()
        return time.perf_counter() - start

    first = batch(1)  # warm-up: the library picks its kernel, the clock ramps up
    products = max(1, round(0.05 / max(batch(1), 1e-9)))
    times, begin = [], time.perf_counter()
    while len(times) < 5 or time.perf_counter() - begin < seconds:
        times.append(batch(products) / products)
    flops = 2.0 * n**3
    return {"size": n, "dtype": str(dtype).removeprefix("torch."), "flops_per_product": flops,
            "gflops": flops / statistics.median(times) / 1e9,
            "best_gflops": flops / min(times) / 1e9, "products_per_sample": products,
            "samples": len(times), "first_product_s": first,
            "seconds": time.perf_counter() - begin}


def write(device: str, precision: str, threads: int, out: Path, seconds: float,
          size: int | None) -> dict:
    record = measure(device, precision, threads, seconds, size)
    result.write_json_atomic(out, record)
    return record


def describe(record: dict) -> str:
    """One line: the figure, or why there is none."""
    name = f"{record['device']} {record['precision']} ×{record['threads']} threads"
    if record["status"] != "ok":
        return f"{name}: {record['status']} ({record['reason']})"
    return (f"{name}: {record['gflops']:.1f} GFLOP/s (best {record['best_gflops']:.1f}; "
            f"{record['size']}² {record['dtype']} products, {record['samples']} samples)")
