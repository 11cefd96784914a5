"""TensorFlow backend: transformers' TensorFlow classes (tf-keras), eager or tf.function."""

import os

# Before transformers or TensorFlow load: no PyTorch in a TensorFlow cell, the Keras 2
# API that transformers' TF classes need, and no log spam in the cell's log.
os.environ.setdefault("USE_TORCH", "0")
os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
import transformers  # noqa: E402

from dlbench.frameworks import Step  # noqa: E402
from dlbench.models import ModelSpec  # noqa: E402


def _eager(model, inputs: dict) -> Step:
    return lambda: model(**inputs, training=False).last_hidden_state


def _graph(model, inputs: dict) -> Step:
    @tf.function
    def forward(input_ids, attention_mask):
        return model(input_ids=input_ids, attention_mask=attention_mask, training=False)

    return lambda: forward(**inputs).last_hidden_state


class TensorFlowBackend:
    name = "tensorflow"
    recipes = {"eager": _eager, "graph": _graph}

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

    def thread_settings(self) -> dict[str, int]:
        return {
            "intra_op": tf.config.threading.get_intra_op_parallelism_threads(),
            "inter_op": tf.config.threading.get_inter_op_parallelism_threads(),
        }

    def build(self, spec: ModelSpec, seed: int):
        tf.keras.utils.set_random_seed(seed)
        config = getattr(transformers, spec.classes.config_class)(**spec.params)
        with tf.device(self._device_name):
            model = getattr(transformers, spec.classes.tensorflow_class)(config)
            # Create the weights now, so that the first timed call is not weight creation.
            model.build_in_name_scope()
        return model

    def inputs(self, token_ids: np.ndarray) -> dict:
        with tf.device(self._device_name):
            ids = tf.constant(token_ids, dtype=tf.int32)
            return {"input_ids": ids, "attention_mask": tf.ones_like(ids)}

    def synchronize(self) -> None:
        if self._on_gpu:
            tf.test.experimental.sync_devices()

    def is_out_of_memory(self, exc: BaseException) -> bool:
        return isinstance(exc, MemoryError | tf.errors.ResourceExhaustedError)

    def versions(self) -> dict[str, str]:
        return {"tensorflow": tf.__version__, "transformers": transformers.__version__}


def make_backend(device: str, threads: int, interop_threads: int) -> TensorFlowBackend:
    return TensorFlowBackend(device, threads, interop_threads)
