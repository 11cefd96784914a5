"""JAX backend: what every scenario needs (device, threads, synchronization, memory peaks,
out-of-memory detection, versions). Scenario operations are in the modules beside this one.

JAX dispatches asynchronously on the CPU as on a GPU: a call returns before its arrays are
computed. A step therefore hands what it computed to `hold`, and `synchronize` blocks until
it is ready (block_until_ready), where the other frameworks wait for their device.
"""

import glob
import os

# Before transformers or JAX load: no PyTorch or TensorFlow in a JAX cell, no log spam,
# weights from a local file or the seed, and on a GPU no grab of 75% of its memory when the
# client starts (as TensorFlow's memory growth: the device view is what the cell uses).
os.environ.setdefault("USE_TORCH", "0")
os.environ.setdefault("USE_TF", "0")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")

import jax  # noqa: E402

from dlbench.frameworks import cpu_precision_problem, gpu_precision_problem  # noqa: E402
from dlbench.frameworks.jax.memory import device_peaks  # noqa: E402
from dlbench.measure import compile_cache  # noqa: E402

# The name XLA:CPU gives the threads of its intra-op pool (Eigen's, prefixed by TSL).
_POOL_THREAD = "XLAEigen"


class JaxBackend:
    name = "jax"

    def __init__(self, device: str, threads: int, interop_threads: int):
        self.requested_threads = threads
        self.on_gpu = device == "gpu"
        # Both are read once, when JAX's clients start (a second backend in one process
        # gets the first one's; thread_settings reports the pool that really exists).
        if not jax._src.xla_bridge.backends_are_initialized():
            # XLA:CPU sizes its intra-op pool from PJRT_NPROC (else from the CPUs it may
            # run on); there is no API for it.
            os.environ["PJRT_NPROC"] = str(threads)
            if not self.on_gpu:
                # A CUDA build would otherwise start on the GPU too (and take its memory).
                jax.config.update("jax_platforms", "cpu")
        self._problem: str | None = None
        try:
            self.device = jax.devices("gpu" if self.on_gpu else "cpu")[0]
        except RuntimeError as exc:
            self._problem = f"JAX sees no GPU (a CPU-only jaxlib, or no CUDA driver): {exc}"
            self.device = jax.devices("cpu")[0]
        jax.config.update("jax_default_device", self.device)
        cache = compile_cache.folder("jax")
        if cache is not None:  # in rounds: the programs of the job's first round, kept
            jax.config.update("jax_compilation_cache_dir", str(cache))
            jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)
            jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
        self._held: object = None

    def device_problem(self) -> str | None:
        return self._problem

    def precision_problem(self, precision: str) -> str | None:
        if precision == "fp32":
            return None
        if not self.on_gpu:
            return cpu_precision_problem(precision)
        capability = getattr(self.device, "compute_capability", "0.0")
        major, minor = (int(part) for part in str(capability).split(".")[:2])
        return gpu_precision_problem(precision, self.device.device_kind, (major, minor))

    def set_arithmetic(self, precision: str) -> dict:
        # JAX's default matmul precision on a GPU lets cuBLAS and cuDNN round float32
        # inputs to TF32 (Ampere or newer); "highest" is true float32 everywhere.
        setting = "tensorfloat32" if precision == "tf32" else "highest"
        jax.config.update("jax_default_matmul_precision", setting)
        read = jax.config.jax_default_matmul_precision
        return {"tf32": read == "tensorfloat32", "switches": {"default_matmul_precision": read}}

    def thread_settings(self) -> dict[str, int]:
        # The intra-op pool counted among the process's threads (what XLA really made).
        # XLA:CPU has no inter-op pool: the independent operations of a compiled program
        # run on the intra-op pool, so inter-op is 1.
        pool = _pool_threads()
        return {"intra_op": pool or self.requested_threads, "inter_op": 1}

    def hold(self, value):
        """Keep `value` (a step's arrays) until the next `synchronize`, which waits for
        it; returns it."""
        self._held = value
        return value

    def synchronize(self) -> None:
        if self._held is not None:
            jax.block_until_ready(self._held)
            self._held = None

    def device_timer(self) -> None:
        # JAX's Python API has no device events: a GPU cell has the host time of each step
        # with block_until_ready.
        return None

    def reset_device_memory(self) -> None:
        """Nothing to reset: JAX's peak (memory_stats) cannot be reset (see
        device_memory)."""

    def memory_counters(self) -> None:
        # The phases of a cell need peaks that can be reset; JAX's cannot.
        return None

    def device_memory(self) -> dict[str, float | str] | None:
        if not self.on_gpu:
            return None
        return device_peaks(self.device.memory_stats() or {})

    def is_out_of_memory(self, exc: BaseException) -> bool:
        if isinstance(exc, MemoryError):
            return True
        # XLA's allocators (BFC on a GPU, the host's) fail with this status.
        return isinstance(exc, jax.errors.JaxRuntimeError) and "RESOURCE_EXHAUSTED" in str(exc)

    def versions(self) -> dict[str, str | None]:
        import flax
        import jaxlib

        # The GPU client's platform version names its CUDA (e.g. "cuda 12080").
        cuda = self.device.client.platform_version if self.on_gpu else None
        return {"jax": jax.__version__, "jaxlib": jaxlib.__version__, "flax": flax.__version__,
                "jax_cuda": cuda, "PJRT_NPROC": os.environ.get("PJRT_NPROC")}


def _pool_threads() -> int:
    """How many threads of XLA:CPU's intra-op pool this process has."""
    count = 0
    for comm in glob.glob("/proc/self/task/*/comm"):
        try:
            with open(comm) as f:
                count += _POOL_THREAD in f.read()
        except OSError:  # the thread ended meanwhile
            pass
    return count


def make_backend(device: str, threads: int, interop_threads: int) -> JaxBackend:
    return JaxBackend(device, threads, interop_threads)
