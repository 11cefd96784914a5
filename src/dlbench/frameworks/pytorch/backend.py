"""PyTorch backend: what every scenario needs (device, threads, synchronization, CUDA-event
timing, memory peaks, out-of-memory detection, versions). Scenario operations are in the
modules beside this one."""

import os
import re
import shutil
import tempfile
from pathlib import Path

# transformers 4.x imports TensorFlow too when it finds it: seconds and ~500 MB per cell.
os.environ.setdefault("USE_TF", "0")
os.environ.setdefault("HF_HUB_OFFLINE", "1")  # weights come from a local file or the seed

import torch  # noqa: E402

from dlbench.files import scratch  # noqa: E402
from dlbench.frameworks import cpu_precision_problem, gpu_precision_problem  # noqa: E402
from dlbench.measure import compile_cache  # noqa: E402


class PyTorchBackend:
    name = "pytorch"

    def __init__(self, device: str, threads: int, interop_threads: int):
        torch.set_num_threads(threads)
        torch.set_num_interop_threads(interop_threads)
        self.device = torch.device("cuda" if device == "gpu" else "cpu")

    def device_problem(self) -> str | None:
        if self.device.type == "cuda" and not torch.cuda.is_available():
            return "PyTorch sees no CUDA device"
        return None

    def precision_problem(self, precision: str) -> str | None:
        if precision == "fp32":
            return None
        if self.device.type == "cpu":
            return cpu_precision_problem(precision)
        return gpu_precision_problem(precision, torch.cuda.get_device_name(self.device),
                                     torch.cuda.get_device_capability(self.device))

    def set_arithmetic(self, precision: str) -> dict:
        mode = "tf32" if precision == "tf32" else "ieee"
        switches = {}
        if hasattr(torch.backends, "fp32_precision"):  # PyTorch 2.9 and later
            # Every float32 matrix product and convolution: cuBLAS, cuDNN (whose
            # convolutions allow TF32 by default) and oneDNN on the CPU, which is always
            # IEEE float32 (TF32 exists on GPUs only).
            for name, backend in (("cuda.matmul", torch.backends.cuda.matmul),
                                  ("cudnn.conv", torch.backends.cudnn.conv),
                                  ("cudnn.rnn", torch.backends.cudnn.rnn),
                                  ("mkldnn.matmul", torch.backends.mkldnn.matmul),
                                  ("mkldnn.conv", torch.backends.mkldnn.conv)):
                backend.fp32_precision = "ieee" if name.startswith("mkldnn") else mode
                switches[f"{name}.fp32_precision"] = backend.fp32_precision
        else:
            torch.backends.cuda.matmul.allow_tf32 = mode == "tf32"
            torch.backends.cudnn.allow_tf32 = mode == "tf32"
            torch.set_float32_matmul_precision("high" if mode == "tf32" else "highest")
            switches = {"cuda.matmul.allow_tf32": torch.backends.cuda.matmul.allow_tf32,
                        "cudnn.allow_tf32": torch.backends.cudnn.allow_tf32,
                        "float32_matmul_precision": torch.get_float32_matmul_precision()}
        tf32 = any(value in ("tf32", True, "high", "medium") for value in switches.values())
        return {"tf32": tf32, "switches": switches}

    def thread_settings(self) -> dict[str, int]:
        return {"intra_op": torch.get_num_threads(), "inter_op": torch.get_num_interop_threads()}

    def synchronize(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)

    def device_timer(self) -> "_CudaEvents | None":
        return _CudaEvents() if self.device.type == "cuda" else None

    def reset_device_memory(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.empty_cache()  # what an earlier cell of the process left cached
            torch.cuda.reset_peak_memory_stats(self.device)

    def memory_counters(self) -> "PyTorchBackend | None":
        return self if self.device.type == "cuda" else None

    def device_allocated_mb(self) -> float:
        return torch.cuda.memory_allocated(self.device) / 2**20

    def device_peaks_mb(self) -> dict[str, float]:
        return {"allocated": torch.cuda.max_memory_allocated(self.device) / 2**20,
                "reserved": torch.cuda.max_memory_reserved(self.device) / 2**20}

    def reset_device_peaks(self) -> None:
        torch.cuda.reset_peak_memory_stats(self.device)

    def device_memory(self) -> dict[str, float] | None:
        if self.device.type != "cuda":
            return None
        return {
            "device_allocated_peak_mb": torch.cuda.max_memory_allocated(self.device) / 2**20,
            "device_reserved_peak_mb": torch.cuda.max_memory_reserved(self.device) / 2**20,
            "device_method": "torch.cuda.max_memory_allocated / max_memory_reserved",
        }

    def is_out_of_memory(self, exc: BaseException) -> bool:
        if isinstance(exc, MemoryError | torch.cuda.OutOfMemoryError):
            return True
        # The CPU allocator's failure is a plain RuntimeError.
        return isinstance(exc, RuntimeError) and "can't allocate memory" in str(exc)

    def versions(self) -> dict[str, str | None]:
        cudnn = torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None
        onednn = re.search(r"MKL-DNN v([\w.]+)", torch.__config__.show())
        return {"torch": torch.__version__, "torch_cuda": torch.version.cuda,
                "torch_cudnn": str(cudnn) if cudnn else None,
                "torch_onednn": onednn.group(1) if onednn else None}


class _CudaEvents:
    """CUDA events recorded on the current stream, where the steps run."""

    method = "CUDA events (torch.cuda.Event) on the current stream"

    def __init__(self):
        self._start = torch.cuda.Event(enable_timing=True)
        self._end = torch.cuda.Event(enable_timing=True)

    def start(self) -> None:
        self._start.record()

    def stop(self) -> None:
        self._end.record()

    def elapsed_ms(self) -> float:
        return self._start.elapsed_time(self._end)


class InductorCaches:
    """A fresh Inductor cache for each compiled cell, so that its first call pays a cold
    compilation, the same in every run; `release` removes them and puts the environment
    back as the cell found it. In rounds, the job's cache instead (emptied in its first
    round, kept for the later ones: dlbench.measure.compile_cache)."""

    def __init__(self):
        self._folders: list[str] = []
        self._saved: dict[str, str | None] = {}

    def fresh(self) -> None:
        _probe_vector_isas()
        _keep_precompiled_headers()
        kept = compile_cache.folder("pytorch")
        if kept is not None:
            folder = str(kept)
        else:
            folder = tempfile.mkdtemp(prefix="dlbench-inductor-")
            self._folders.append(folder)
        for name, value in (("TORCHINDUCTOR_CACHE_DIR", folder),
                            ("TRITON_CACHE_DIR", os.path.join(folder, "triton"))):
            self._saved.setdefault(name, os.environ.get(name))
            os.environ[name] = value

    def release(self) -> None:
        """Forget compiled graphs (the next cell compiles afresh, not as a recompilation
        with dynamic shapes), remove the caches, restore the environment."""
        torch.compiler.reset()
        for folder in self._folders:
            shutil.rmtree(folder, ignore_errors=True)
        self._folders.clear()
        for name, value in self._saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        self._saved.clear()


def isa_probe_folder() -> Path:
    """Where Inductor's probe of the vector instruction sets is kept: one folder per machine
    and user (as Inductor's own default cache, /tmp/torchinductor_<user>), by uid, which
    needs no user database."""
    return scratch.shared() / f"dlbench-inductor-isa-probes-{os.getuid()}"


def _probe_vector_isas() -> None:
    """Inductor finds which vector instruction sets (AVX2, AVX-512, AMX, …) the C++ compiler
    can build for by compiling a test program per set into its cache: 7-10 s of a tiny
    model's 15-19 s cold compilation on 2 cores (2026-11-29), machine detection rather than
    the model's compilation. A user pays it once per machine (Inductor's default cache is
    kept); a fresh cache per cell paid it in every cell. So the probe's programs go to one
    folder kept in the shared temporary folder, before the cell's own cache is set; the
    process keeps the answer in memory for its later cells (Inductor caches it). Where that
    folder cannot be written, the cell's compilation probes in its own cache, as before."""
    from torch._inductor import cpu_vec_isa

    saved = os.environ.get("TORCHINDUCTOR_CACHE_DIR")
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = str(isa_probe_folder())
    try:
        cpu_vec_isa.valid_vec_isa_list()
    except OSError:
        pass  # probed again in the cell's cache, at its first compilation
    finally:
        if saved is None:
            os.environ.pop("TORCHINDUCTOR_CACHE_DIR", None)
        else:
            os.environ["TORCHINDUCTOR_CACHE_DIR"] = saved


def precompiled_header_folder() -> Path:
    """Where Inductor's precompiled C++ headers are kept: one folder per machine and user,
    as the ISA probe's."""
    return scratch.shared() / f"dlbench-inductor-headers-{os.getuid()}"


def _keep_precompiled_headers() -> None:
    """Inductor precompiles the header that its C++ kernels for the CPU include (4.7-5.4 s
    of g++ on 2 cores, 2026-12-01), once per machine, compiler and flags, and keeps it in
    its default cache, "global, rather than ignored by fresh_cache"
    (torch/_inductor/codecache.py): a user's later compilations find it. In a cell that
    folder was the process's own temporary one, removed with it, so every compiled cell
    built the header again. Now it goes to a folder kept in the shared temporary folder
    (files named by the compiler, its flags and the preprocessed header; written under
    Inductor's locks), for the process's later cells too. Where that folder cannot be
    written, the cell builds the header in its own, as before."""
    from torch._inductor import codecache

    folder = precompiled_header_folder()
    try:
        (folder / "locks").mkdir(parents=True, exist_ok=True)
    except OSError:
        return
    codecache._HEADER_DIR = str(folder)
    codecache._HEADER_LOCK_DIR = str(folder / "locks")


def make_backend(device: str, threads: int, interop_threads: int) -> PyTorchBackend:
    return PyTorchBackend(device, threads, interop_threads)
