"""TensorFlow backend: transformers' TensorFlow classes (tf-keras); eager, tf.function and
XLA, each in fp32 or under a bf16/fp16 mixed-precision policy."""

import os
from pathlib import Path

# Before transformers or TensorFlow load: no PyTorch in a TensorFlow cell, the Keras 2
# API that transformers' TF classes need, and no log spam in the cell's log.
os.environ.setdefault("USE_TORCH", "0")
os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("HF_HUB_OFFLINE", "1")  # weights come from a local file or the seed

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
import transformers  # noqa: E402

from dlbench.frameworks import Step, cpu_precision_problem, gpu_precision_problem  # noqa: E402
from dlbench.models import ModelSpec  # noqa: E402
from dlbench.optimizations import Optimization  # noqa: E402

_POLICIES = {"bf16": "mixed_bfloat16", "fp16": "mixed_float16"}


def _forward(model, inputs: dict):
    return model(**inputs, training=False).last_hidden_state


def _eager(model, inputs: dict, optimization: Optimization) -> Step:
    return lambda: _forward(model, inputs)


def _function(model, inputs: dict, jit_compile: bool) -> Step:
    # The inputs are arguments, not captured constants that a compiler could fold.
    @tf.function(jit_compile=jit_compile)
    def forward(input_ids, attention_mask):
        return _forward(model, {"input_ids": input_ids, "attention_mask": attention_mask})

    return lambda: forward(**inputs)


def _graph(model, inputs: dict, optimization: Optimization) -> Step:
    return _function(model, inputs, jit_compile=False)


def _xla(model, inputs: dict, optimization: Optimization) -> Step:
    return _function(model, inputs, jit_compile=True)


class TensorFlowBackend:
    name = "tensorflow"
    recipes = {"eager": _eager, "graph": _graph, "xla": _xla}

    def __init__(self, device: str, threads: int, interop_threads: int):
        # Thread pools are fixed when the runtime starts: set them before any op runs.
        tf.config.threading.set_intra_op_parallelism_threads(threads)
        tf.config.threading.set_inter_op_parallelism_threads(interop_threads)
        self._gpus = tf.config.list_physical_devices("GPU")
        if device == "cpu" and self._gpus:
            tf.config.set_visible_devices([], "GPU")
        self._on_gpu = device == "gpu"
        self._device_name = "/GPU:0" if self._on_gpu else "/CPU:0"

    def device_problem(self) -> str | None:
        if self._on_gpu and not self._gpus:
            return "TensorFlow sees no GPU (no CUDA driver, or a CPU-only TensorFlow build)"
        return None

    def optimization_problem(self, optimization: Optimization) -> str | None:
        precision = optimization.precision.name
        if precision == "fp32":
            return None
        if not self._on_gpu:
            return cpu_precision_problem(precision)
        details = tf.config.experimental.get_device_details(self._gpus[0])
        return gpu_precision_problem(precision, details.get("device_name", "the GPU"),
                                     tuple(details.get("compute_capability") or (0, 0)))

    def thread_settings(self) -> dict[str, int]:
        return {
            "intra_op": tf.config.threading.get_intra_op_parallelism_threads(),
            "inter_op": tf.config.threading.get_inter_op_parallelism_threads(),
        }

    def build(self, spec: ModelSpec, seed: int, optimization: Optimization,
              weights: Path | None = None):
        # The policy applies to the layers created after it is set: compute in the
        # reduced precision, variables (and so the loaded weights) in float32.
        policy = _POLICIES.get(optimization.precision.name, "float32")
        tf.keras.mixed_precision.set_global_policy(policy)
        tf.keras.utils.set_random_seed(seed)
        config = getattr(transformers, spec.classes.config_class)(**spec.params)
        with tf.device(self._device_name):
            model = getattr(transformers, spec.classes.tensorflow_class)(config)
            # Create the weights now, so that the first timed call is not weight creation.
            model.build_in_name_scope()
            if weights is not None:
                _load_pytorch_weights(model, Path(weights))
        return model

    def inputs(self, token_ids: np.ndarray) -> dict:
        with tf.device(self._device_name):
            ids = tf.constant(token_ids, dtype=tf.int32)
            return {"input_ids": ids, "attention_mask": tf.ones_like(ids)}

    def synchronize(self) -> None:
        if self._on_gpu:
            tf.test.experimental.sync_devices()

    def device_timer(self) -> None:
        # TensorFlow's Python API has no device events (its steps run on streams it does
        # not expose): a GPU cell has the host time of each step with sync_devices().
        return None

    def reset_device_memory(self) -> None:
        if self._on_gpu:
            tf.config.experimental.reset_memory_stats("GPU:0")

    def device_memory(self) -> dict[str, float] | None:
        if not self._on_gpu:
            return None
        info = tf.config.experimental.get_memory_info("GPU:0")
        return {"device_allocated_peak_mb": info["peak"] / 2**20,
                "device_method": "tf.config.experimental.get_memory_info peak"}

    def to_numpy(self, output) -> np.ndarray:
        return tf.cast(output, tf.float32).numpy()

    def release(self) -> None:
        # The next cell of a group starts from an empty Keras state (layer names, graphs).
        tf.keras.backend.clear_session()

    def is_out_of_memory(self, exc: BaseException) -> bool:
        return isinstance(exc, MemoryError | tf.errors.ResourceExhaustedError)

    def versions(self) -> dict[str, str]:
        return {"tensorflow": tf.__version__, "transformers": transformers.__version__}


def _load_pytorch_weights(model, weights: Path) -> None:
    """PyTorch's safetensors weights into the TF model, without importing torch.

    (`from_pretrained(folder)` would read them too, but transformers 4.57 cannot iterate
    the safe_open handle of safetensors 0.8; a dict of numpy arrays works.)
    """
    from safetensors.numpy import load_file
    from transformers.modeling_tf_pytorch_utils import load_pytorch_state_dict_in_tf2_model

    state = load_file(weights)
    _, info = load_pytorch_state_dict_in_tf2_model(
        model, state, tf_inputs=False, allow_missing_keys=True, output_loading_info=True,
        skip_logger_warnings=True,
    )
    if info["missing_keys"] or info["mismatched_keys"]:
        raise ValueError(f"{weights} does not fit {type(model).__name__}: {info}")


def make_backend(device: str, threads: int, interop_threads: int) -> TensorFlowBackend:
    return TensorFlowBackend(device, threads, interop_threads)
