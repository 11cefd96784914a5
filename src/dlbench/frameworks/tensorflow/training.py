"""TensorFlow training of the CNN from image files: the Keras model, its input pipelines
(tf.data with decode_png, or the decoded set in memory), the training step (eager,
tf.function, XLA) in each precision, and evaluation with dropout off."""

# The backend first: it sets the environment that transformers and the framework read
# when they load.
from dlbench.frameworks.tensorflow.backend import TensorFlowBackend  # isort: split

import itertools
import re
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import tensorflow as tf

from dlbench.catalogue.models.vision import CNN
from dlbench.catalogue.optimizers import LearningRate, Optimizer
from dlbench.catalogue.recipes import Optimization
from dlbench.data import damaged_file_error, decode
from dlbench.data.pipeline import PAD, Pipeline
from dlbench.frameworks.tensorflow.optimizer import make_optimizer, schedule
from dlbench.measure import faults

_POLICIES = {"bf16": "mixed_bfloat16", "fp16": "mixed_float16"}
# tf.data's static optimizations that are on unless turned off (TensorFlow 2.21,
# tf.data.experimental.OptimizationOptions), each preparing or parallelising more than a
# pipeline's name says: map_and_batch_fusion (a fused op whose thread builds the next batch
# during the step), map_parallelization (a stateless map made parallel), parallel_batch
# (batch elements copied in parallel), inject_prefetch (a prefetch after the last
# synchronous transformation), plus noop_elimination and shuffle_and_repeat_fusion.
_DEFAULT_OPTIMIZATIONS = ("map_and_batch_fusion", "map_parallelization", "parallel_batch",
                          "inject_prefetch", "noop_elimination", "shuffle_and_repeat_fusion")


def file_pipeline_options() -> tf.data.Options:
    """A pipeline that does what its transformations say and nothing on its own: no
    default optimization, no autotuning (of buffers or parallelism), no threads started
    before the first batch is asked for, and batches in order (as PyTorch's DataLoader
    gives them, in_order=True)."""
    options = tf.data.Options()
    options.deterministic = True
    optimization = options.experimental_optimization
    optimization.apply_default_optimizations = False
    for name in _DEFAULT_OPTIMIZATIONS:
        setattr(optimization, name, False)
    options.autotune.enabled = False
    options.experimental_warm_start = False
    return options


def keras_model(spec: CNN, data_format: str) -> tf.keras.Model:
    """The CNN of dlbench.catalogue.models.vision as Keras layers (ReLU after pooling, as there)."""
    layers, c, k = tf.keras.layers, spec.channels, spec.kernel
    side = spec.image_size
    shape = (c[0], side, side) if data_format == "channels_first" else (side, side, c[0])
    conv = {"kernel_size": k, "padding": "same", "data_format": data_format}
    pool = {"pool_size": 2, "data_format": data_format}
    return tf.keras.Sequential([
        tf.keras.Input(shape),
        layers.Conv2D(c[1], activation="relu", name="conv1", **conv),
        layers.Conv2D(c[2], name="conv2", **conv),
        layers.MaxPooling2D(**pool), layers.ReLU(), layers.Dropout(spec.dropout[0]),
        layers.Conv2D(c[3], activation="relu", name="conv3", **conv),
        layers.Conv2D(c[4], name="conv4", **conv),
        layers.MaxPooling2D(**pool), layers.ReLU(), layers.Dropout(spec.dropout[1]),
        layers.Flatten(data_format=data_format),
        layers.Dense(spec.hidden, activation="relu", name="fc1"),
        layers.Dropout(spec.dropout[2]),
        # Logits in float32 under a mixed-precision policy, for a stable loss.
        layers.Dense(spec.classes, name="fc2", dtype="float32"),
    ])


def keras_weights(weights: dict[str, np.ndarray], spec: CNN, data_format: str) -> dict:
    """Canonical (PyTorch-layout) weights in Keras's layouts: HWIO kernels, (in, out) dense
    kernels, and the first dense layer's inputs in H, W, C order: Keras's Flatten puts
    channels-first features into channels-last order before flattening (to keep dense
    weights valid across data formats), so both data formats flatten H, W, C."""
    out = {}
    for i in range(1, 5):
        out[f"conv{i}"] = [weights[f"conv{i}.weight"].transpose(2, 3, 1, 0),
                           weights[f"conv{i}.bias"]]
    side = spec.image_size // 4
    fc1 = weights["fc1.weight"].reshape(spec.hidden, spec.channels[-1], side, side)
    fc1 = fc1.transpose(0, 2, 3, 1)  # C, H, W (PyTorch's flatten) → H, W, C (Keras's)
    out["fc1"] = [fc1.reshape(spec.hidden, -1).T.copy(), weights["fc1.bias"]]
    out["fc2"] = [weights["fc2.weight"].T.copy(), weights["fc2.bias"]]
    return out


class InputFileError(RuntimeError):
    """A file of the data set vanished or does not decode: the cell's `error`."""


def _op_problem(message: str) -> str:
    """An op error's own words, without tf.data's prefixes (the function node, the
    iterator's chain of transformations)."""
    message = re.sub(r"^\{\{function_node [^}]*\}\}\s*", "", message.splitlines()[0])
    return re.sub(r"^Error in user-defined function .*? with iterator: \S+: ", "", message)


class DecodedCache:
    """Decoded images kept for the whole pipeline, filled as images are first decoded: as
    PyTorch's SharedCache (tf.data's `cache()` would need the whole set read before the
    first shuffled batch)."""

    def __init__(self, count: int, shape: tuple[int, ...]):
        with tf.device("/CPU:0"):
            self.pixels = tf.Variable(tf.zeros((count, *shape), tf.uint8), trainable=False)
            self.filled = tf.Variable(tf.zeros((count,), tf.bool), trainable=False)

    def get(self, index, decode: Callable):
        def miss():
            image = decode(index)
            stored = self.pixels.scatter_nd_update([[index]], image[None])
            with tf.control_dependencies([stored]):  # the flag after the pixels
                marked = self.filled.scatter_nd_update([[index]], [True])
            with tf.control_dependencies([marked]):
                return tf.identity(image)

        return tf.cond(self.filled[index], lambda: self.pixels[index], miss)


class TensorFlowTraining:
    def __init__(self, backend: TensorFlowBackend):
        self.backend = backend
        self.data_format = "channels_last"

    # -- model and optimizer ---------------------------------------------------------------

    def build(self, spec: CNN, weights: dict[str, np.ndarray],
              optimization: Optimization) -> tf.keras.Model:
        # The policy applies to layers created after it is set (release() resets it).
        policy = _POLICIES.get(optimization.precision.name, "float32")
        tf.keras.mixed_precision.set_global_policy(policy)
        self.data_format = "channels_first" if optimization.recipe.name == "channels-first" \
            else "channels_last"
        with tf.device(self.backend.device_name):
            model = keras_model(spec, self.data_format)
            for name, values in keras_weights(weights, spec, self.data_format).items():
                model.get_layer(name).set_weights(values)
        return model

    def optimizer(self, model, optimizer: Optimizer, learning_rate: LearningRate,
                  optimization: Optimization):
        return make_optimizer(optimizer, schedule(learning_rate), optimization)

    # -- input pipelines ---------------------------------------------------------------------

    def pipeline(self, manifest: dict, pipeline: Pipeline, batch: int,
                 seed: int) -> "Callable[[int], Iterator]":
        """A function of the epoch that gives that epoch's batches of (images, labels)."""
        mean = tf.constant(manifest["mean"], tf.float32) * 255
        std = tf.constant(manifest["std"], tf.float32) * 255
        side = manifest["image_shape"][0]

        def augment(image):  # uint8 H × W × 3 → normalised float32
            image = tf.image.pad_to_bounding_box(image, PAD, PAD, side + 2 * PAD,
                                                 side + 2 * PAD)
            image = tf.image.random_crop(image, (side, side, 3))
            if manifest["flip"]:
                image = tf.image.random_flip_left_right(image)
            return (tf.cast(image, tf.float32) - mean) / std

        if pipeline.in_memory:
            return self._memory_pipeline(manifest, batch, seed, mean, std)
        root = Path(manifest["root"])
        paths = tf.constant([str(root / path) for path, _ in manifest["train"]])
        labels = tf.constant([label for _, label in manifest["train"]])
        shape = (side, side, 3)
        cache = DecodedCache(len(manifest["train"]), shape) if pipeline.cache else None
        delay_s = faults.decode_delay_s()

        def slow(image):  # a slow decoder, for tests only (dlbench.measure.faults)
            time.sleep(delay_s)
            return image

        fault = faults.pipeline_fault()
        if fault not in ("vanish-file", "corrupt-file"):
            fault = None

        def spoil(path):  # a file deleted or corrupted mid-epoch, for tests only
            return faults.spoil_file(fault, path.numpy())

        def decode_one(index):
            path = paths[index]
            if fault:
                path = tf.ensure_shape(tf.py_function(spoil, [path], tf.string), ())
            image = tf.io.decode_png(tf.io.read_file(path), channels=3)
            if delay_s:
                image = tf.py_function(slow, [image], tf.uint8)
            return tf.ensure_shape(image, shape)

        def load(index):  # as PyTorch's Dataset.__getitem__: one image, decoded on demand
            image = cache.get(index, decode_one) if cache else decode_one(index)
            return augment(image), labels[index]

        # As PyTorch's shuffled sampler: a permutation of the indices each epoch, each
        # image decoded when its batch is built (never the whole set at the first request).
        calls = pipeline.workers or None  # 0 workers: sequential, as PyTorch's
        dataset = tf.data.Dataset.range(len(manifest["train"])).shuffle(
            len(manifest["train"]), seed=seed).map(load, num_parallel_calls=calls)
        dataset = dataset.batch(batch, drop_remainder=True)
        if pipeline.workers:  # as PyTorch's loaders: each prepares `ahead` batches
            dataset = dataset.prefetch(pipeline.workers * pipeline.ahead)
        dataset = dataset.with_options(file_pipeline_options())

        def epoch(number: int) -> Iterator:
            batches = iter(dataset)
            for done in itertools.count():
                try:
                    x, y = next(batches)
                except StopIteration:
                    return
                except (tf.errors.NotFoundError, tf.errors.InvalidArgumentError,
                        tf.errors.DataLossError) as exc:
                    where = f"epoch {number + 1}, after {done} batches"
                    # decode_png's error does not name the file: a scan of the set does.
                    named = damaged_file_error(manifest, exc)
                    if named is not exc:
                        raise type(named)(f"{named} ({where})") from None
                    raise InputFileError(
                        f"a training file could not be read or decoded ({where}): "
                        f"{type(exc).__name__}: {_op_problem(exc.message)}") from exc
                yield self._layout(x), y

        return epoch

    def _memory_pipeline(self, manifest: dict, batch: int, seed: int, mean, std):
        """The decoded training set as one array on the device; each epoch a permutation,
        and each batch gathered and augmented as a whole by one tf.function, faster than
        its half-dozen operations one by one (bench/memory_pipelines.py; the figures:
        docs/measurements.md)."""
        images, labels = decode(manifest, "train")
        rng = np.random.default_rng(seed)
        n, side = len(labels), images.shape[1]
        with tf.device(self.backend.device_name):
            data, targets = tf.constant(images), tf.constant(labels)

        @tf.function(input_signature=[tf.TensorSpec([batch], tf.int64),
                                      tf.TensorSpec([batch, 2], tf.int64),
                                      tf.TensorSpec([batch], tf.bool)])
        def gather_augment(index, offsets, flips):
            steps = tf.range(side, dtype=tf.int64)
            x = tf.pad(tf.gather(data, index), [[0, 0], [PAD, PAD], [PAD, PAD], [0, 0]])
            x = tf.gather(x, offsets[:, :1] + steps, axis=1, batch_dims=1)
            x = tf.gather(x, offsets[:, 1:] + steps, axis=2, batch_dims=1)
            x = tf.where(flips[:, None, None, None], tf.reverse(x, [2]), x)
            return (tf.cast(x, tf.float32) - mean) / std, tf.gather(targets, index)

        def make(index, offsets, flips):
            with tf.device(self.backend.device_name):
                x, y = gather_augment(index, offsets, flips)
                return self._layout(x), y

        self._batch_function = gather_augment  # its traces, for tests
        # Traced with the pipeline, not in the first step's input wait.
        make(np.arange(batch), np.zeros((batch, 2), np.int64), np.zeros(batch, bool))

        def epoch(_: int) -> Iterator:
            order = rng.permutation(n)
            for start in range(0, n - batch + 1, batch):
                offsets = rng.integers(0, 2 * PAD + 1, size=(batch, 2))
                flips = (rng.random(batch) < 0.5) & manifest["flip"]
                yield make(order[start:start + batch], offsets, flips)

        return epoch

    def _layout(self, x):
        return tf.transpose(x, (0, 3, 1, 2)) if self.data_format == "channels_first" else x

    # -- the training step -------------------------------------------------------------------

    def train_step(self, model, opt, optimization: Optimization) -> "TensorFlowStep":
        """The training step, in parts (see dlbench.measure.training.TrainingStep)."""
        return TensorFlowStep(model, opt, optimization, self.backend.device_name,
                              self.data_format)

    def mean_loss(self, losses: list) -> float:
        return float(tf.reduce_mean(tf.cast(tf.stack(losses), tf.float32)))

    # -- evaluation --------------------------------------------------------------------------

    def logits(self, model, images: np.ndarray, manifest: dict, batch: int = 500) -> np.ndarray:
        """Logits of uint8 NHWC images, normalised as in training, with dropout off."""
        mean = np.asarray(manifest["mean"], np.float32) * 255
        std = np.asarray(manifest["std"], np.float32) * 255
        out = []
        for start in range(0, len(images), batch):
            x = (images[start:start + batch].astype(np.float32) - mean) / std
            if self.data_format == "channels_first":
                x = x.transpose(0, 3, 1, 2)
            with tf.device(self.backend.device_name):
                out.append(tf.cast(model(x, training=False), tf.float32).numpy())
        return np.concatenate(out)

    def compilation(self) -> None:
        """torch.compile's counters: none in TensorFlow."""
        return None

    def release(self) -> None:
        """Leave the process as the cell found it: empty Keras state, float32 policy."""
        tf.keras.backend.clear_session()
        tf.keras.mixed_precision.set_global_policy("float32")


class TensorFlowStep:
    """A training step of the CNN: copy to the device, gradients (forward + loss + backward
    under a GradientTape), optimizer step (loss scaling in fp16). With tf.function or XLA the
    whole step is one function; timed in parts, gradients and the optimizer step are two
    functions (the gradients then leave the first as its outputs)."""

    separable = True

    def __init__(self, model, opt, optimization: Optimization, device: str,
                 data_format: str):
        self.model, self.opt, self.device, self.data_format = model, opt, device, data_format
        self.scaled = isinstance(opt, tf.keras.mixed_precision.LossScaleOptimizer)
        self._grads = None
        recipe = optimization.recipe.name
        if recipe in ("graph", "xla"):
            options = {"jit_compile": recipe == "xla"}
            self._gradients = tf.function(self._gradients, **options)
            self._apply = tf.function(self._apply, **options)
            self._compute = tf.function(self._compute, **options)

    def to_device(self, batch):
        with tf.device(self.device):  # a copy on a GPU; on the CPU the batch is there
            return tf.identity(batch[0]), tf.identity(batch[1])

    def _gradients(self, x, y):
        with tf.GradientTape() as tape:
            logits = self.model(x, training=True)
            loss = tf.reduce_mean(tf.keras.losses.sparse_categorical_crossentropy(
                y, logits, from_logits=True))
            scaled = self.opt.get_scaled_loss(loss) if self.scaled else loss
        grads = tape.gradient(scaled, self.model.trainable_variables)
        if self.scaled:
            grads = self.opt.get_unscaled_gradients(grads)
        return loss, grads

    def _apply(self, grads):
        self.opt.apply_gradients(zip(grads, self.model.trainable_variables, strict=True))

    def _compute(self, x, y):
        loss, grads = self._gradients(x, y)
        self._apply(grads)
        return loss

    def forward_backward(self, x, y):
        with tf.device(self.device):
            loss, self._grads = self._gradients(x, y)
        return loss

    def optimizer_step(self) -> None:
        with tf.device(self.device):
            self._apply(self._grads)

    def compute(self, x, y):
        with tf.device(self.device):
            return self._compute(x, y)

    def __call__(self, batch):
        return self.compute(*self.to_device(batch))

    def _variables(self) -> list:
        """Every variable of the model and the optimizer: its slots (built now, if no step
        built them yet), count of updates, current rate and loss scale. A legacy optimizer
        (no `build`) lists its slots itself: they are no tracked children."""
        build = getattr(self.opt, "build", None)
        if callable(build):
            build(self.model.trainable_variables)  # returns at once once built
        listed = self.opt.variables
        root = tf.train.Checkpoint(model=self.model, optimizer=self.opt)
        found = [*self.model.variables, *(listed() if callable(listed) else listed),
                 *(v for v in tf.train.TrackableView(root).descendants()
                   if isinstance(v, tf.Variable))]
        return list({id(v): v for v in found}.values())

    def snapshot(self) -> list[tuple]:
        return [(variable, variable.numpy()) for variable in self._variables()]

    def restore(self, snapshot: list[tuple]) -> None:
        """Assigned in place: the traced functions keep reading the same variables."""
        for variable, value in snapshot:
            variable.assign(value)


def make_ops(backend: TensorFlowBackend) -> TensorFlowTraining:
    return TensorFlowTraining(backend)
