"""TensorFlow backend: what every scenario needs (device, threads, synchronization, memory
peaks, out-of-memory detection, versions). Scenario operations are in the modules beside
this one."""

import os

# Before transformers or TensorFlow load: no PyTorch in a TensorFlow cell, the Keras 2
# API that transformers' TF classes need, and no log spam in the cell's log.
os.environ.setdefault("USE_TORCH", "0")
os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("HF_HUB_OFFLINE", "1")  # weights come from a local file or the seed

from dlbench.measure import compile_cache  # noqa: E402

# In rounds, XLA's programs of the job's first round, kept (read when TensorFlow loads).
_CACHE = compile_cache.folder("tensorflow")
if _CACHE is not None:
    os.environ["TF_XLA_FLAGS"] = " ".join(
        [os.environ.get("TF_XLA_FLAGS", ""), f"--tf_xla_persistent_cache_directory={_CACHE}"]
    ).strip()

import tensorflow as tf  # noqa: E402

from dlbench.frameworks import cpu_precision_problem, gpu_precision_problem  # noqa: E402


class TensorFlowBackend:
    name = "tensorflow"

    def __init__(self, device: str, threads: int, interop_threads: int):
        # Thread pools are fixed when the runtime starts: set them before any op runs.
        tf.config.threading.set_intra_op_parallelism_threads(threads)
        tf.config.threading.set_inter_op_parallelism_threads(interop_threads)
        self._gpus = tf.config.list_physical_devices("GPU")
        if device == "cpu" and self._gpus:
            tf.config.set_visible_devices([], "GPU")
        self.memory_growth = False
        if device == "gpu" and self._gpus:
            # Without it TensorFlow reserves almost the whole GPU when it starts, and NVML's
            # view of the process is the card's size whatever the cell uses. (Like the
            # thread pools, this is fixed before the runtime starts.)
            for gpu in self._gpus:
                tf.config.experimental.set_memory_growth(gpu, True)
            self.memory_growth = all(tf.config.experimental.get_memory_growth(gpu)
                                     for gpu in self._gpus)
        self.on_gpu = device == "gpu"
        self.device_name = "/GPU:0" if self.on_gpu else "/CPU:0"

    def device_problem(self) -> str | None:
        if self.on_gpu and not self._gpus:
            return "TensorFlow sees no GPU (no CUDA driver, or a CPU-only TensorFlow build)"
        return None

    def precision_problem(self, precision: str) -> str | None:
        if precision == "fp32":
            return None
        if not self.on_gpu:
            return cpu_precision_problem(precision)
        details = tf.config.experimental.get_device_details(self._gpus[0])
        return gpu_precision_problem(precision, details.get("device_name", "the GPU"),
                                     tuple(details.get("compute_capability") or (0, 0)))

    def set_arithmetic(self, precision: str) -> dict:
        # TensorFlow's default lets float32 matrix products and convolutions on Ampere or
        # newer GPUs round their inputs to TF32: a different computation from float32.
        tf.config.experimental.enable_tensor_float_32_execution(precision == "tf32")
        enabled = tf.config.experimental.tensor_float_32_execution_enabled()
        return {"tf32": enabled, "switches": {"tensor_float_32_execution": enabled}}

    def thread_settings(self) -> dict[str, int]:
        return {
            "intra_op": tf.config.threading.get_intra_op_parallelism_threads(),
            "inter_op": tf.config.threading.get_inter_op_parallelism_threads(),
        }

    def synchronize(self) -> None:
        if self.on_gpu:
            tf.test.experimental.sync_devices()

    def device_timer(self) -> None:
        # TensorFlow's Python API has no device events (its steps run on streams it does
        # not expose): a GPU cell has the host time of each step with sync_devices().
        return None

    def reset_device_memory(self) -> None:
        if self.on_gpu:
            tf.config.experimental.reset_memory_stats("GPU:0")

    def memory_counters(self) -> "TensorFlowBackend | None":
        return self if self.on_gpu else None

    def device_allocated_mb(self) -> float:
        return tf.config.experimental.get_memory_info("GPU:0")["current"] / 2**20

    def device_peaks_mb(self) -> dict[str, float]:
        return {"allocated": tf.config.experimental.get_memory_info("GPU:0")["peak"] / 2**20}

    def reset_device_peaks(self) -> None:
        tf.config.experimental.reset_memory_stats("GPU:0")

    def device_memory(self) -> dict[str, float] | None:
        if not self.on_gpu:
            return None
        info = tf.config.experimental.get_memory_info("GPU:0")
        return {"device_allocated_peak_mb": info["peak"] / 2**20,
                "device_method": "tf.config.experimental.get_memory_info peak",
                "device_memory_growth": self.memory_growth}

    def is_out_of_memory(self, exc: BaseException) -> bool:
        return isinstance(exc, MemoryError | tf.errors.ResourceExhaustedError)

    def versions(self) -> dict[str, str | None]:
        from tensorflow.python.util import _pywrap_util_port

        build = tf.sysconfig.get_build_info()
        cuda = build.get("is_cuda_build")
        return {"tensorflow": tf.__version__,
                "tensorflow_cuda": build.get("cuda_version") if cuda else None,
                "tensorflow_cudnn": build.get("cudnn_version") if cuda else None,
                # oneDNN's custom CPU operations: on or off (TF_ENABLE_ONEDNN_OPTS, whose
                # default depends on the CPU), as TensorFlow decided at start-up.
                "tensorflow_onednn": "on" if _pywrap_util_port.IsMklEnabled() else "off",
                "TF_ENABLE_ONEDNN_OPTS": os.environ.get("TF_ENABLE_ONEDNN_OPTS")}


def make_backend(device: str, threads: int, interop_threads: int) -> TensorFlowBackend:
    return TensorFlowBackend(device, threads, interop_threads)
