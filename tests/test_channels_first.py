"""TensorFlow's channels-first CNN starts from the shared weights: its Flatten and first
dense layer compute, on channels-first features, what the canonical (PyTorch-layout) fc1
computes on the same features flattened C, H, W — and what the channels-last model computes
on them laid out H, W, C. Only Flatten and the dense layers run (Keras's channels-first
convolutions need a GPU), so this runs on the CPU."""

import json
import subprocess
import sys

import numpy as np

from tests.conftest import tool_env

DENSE_LAYERS = """
import json, sys
import numpy as np
from dlbench.frameworks import load_backend
load_backend("tensorflow", "cpu", 2, 1)
import tensorflow as tf
from dlbench.frameworks.tensorflow.training import keras_model, keras_weights
from dlbench.catalogue.models.vision import MODELS, initial_weights

spec = MODELS["cnn"]
weights = initial_weights(spec, 3)
# fc1's bias is zero in the initial weights: a random one checks it is carried over too.
weights["fc1.bias"] = np.random.default_rng(1).normal(size=spec.hidden).astype(np.float32)
side = spec.image_size // 4
features = np.random.default_rng(2).normal(
    size=(4, spec.channels[-1], side, side)).astype(np.float32)  # N, C, H, W
out = {}
for data_format, x in (("channels_first", features),
                       ("channels_last", features.transpose(0, 2, 3, 1))):
    model = keras_model(spec, data_format)
    for name, values in keras_weights(weights, spec, data_format).items():
        model.get_layer(name).set_weights(values)
    flatten = next(l for l in model.layers if isinstance(l, tf.keras.layers.Flatten))
    out[data_format] = model.get_layer("fc1")(flatten(x)).numpy().tolist()
expected = np.maximum(features.reshape(4, -1) @ weights["fc1.weight"].T + weights["fc1.bias"], 0)
out["canonical"] = expected.tolist()
print(json.dumps(out))
"""


def test_channels_first_dense_layers_compute_the_shared_function():
    done = subprocess.run([sys.executable, "-c", DENSE_LAYERS], capture_output=True, text=True,
                          timeout=300, env=tool_env())
    assert done.returncode == 0, done.stderr[-3000:]
    out = {k: np.array(v) for k, v in json.loads(done.stdout.strip().splitlines()[-1]).items()}
    canonical = out["canonical"]
    assert canonical.shape == (4, 512) and np.abs(canonical).max() > 0.1
    for data_format in ("channels_last", "channels_first"):
        error = np.abs(out[data_format] - canonical).max() / np.abs(canonical).max()
        assert error < 1e-5, f"{data_format}: fc1 differs from the shared weights' ({error:.2g})"
