"""JAX training of the CNN from image files: the model (Flax linen), its input pipelines
(Grain over the PNG files, or the decoded set in memory), the training step (optax, under
jax.jit for a compiled recipe, else op by op) in each precision (fp16 with dynamic loss
scaling), and evaluation with dropout off. Only `jit` is registered for JAX (recipes.py):
`eager` also names train_step's recipes, whose JAX steps are always jitted.

Flax linen rather than nnx: linen is a pure function of a parameter pytree, so the shared
weights load as a plain dict and the step is a function that jax.jit compiles as it is;
nnx's objects need nnx.split/merge (or nnx.jit's graph traversal) around every step,
Python work the step would be timed with. Linen stays supported in Flax 0.12.
"""

from collections.abc import Callable, Iterator
from functools import partial
from typing import Any

import flax.linen as nn
import grain
import jax
import jax.numpy as jnp
import numpy as np
import optax

from dlbench.catalogue.models.vision import CNN
from dlbench.catalogue.optimizers import LearningRate, Optimizer
from dlbench.catalogue.recipes import Optimization
from dlbench.data import decode
from dlbench.data.pipeline import PAD, Pipeline
from dlbench.frameworks.jax.conv import conv
from dlbench.frameworks.jax.loader import EpochSlots, LoadImage, SharedImages, exit_with_parent
from dlbench.frameworks.jax.optimizer import INITIAL_SCALE, make_optimizer, scaled_update, schedule

_COMPUTE = {"bf16": jnp.bfloat16, "fp16": jnp.float16}


@jax.jit
def _gather_augment(data, targets, index, offsets, flips, mean, std):
    """One batch of the decoded set on the device: gathered, padded by PAD, cropped back
    at each image's offsets (row, column), flipped where `flips` says, normalised."""
    side = data.shape[1]
    x = jnp.pad(data[index], ((0, 0), (PAD, PAD), (PAD, PAD), (0, 0)))
    rows = offsets[:, :1] + jnp.arange(side)  # batch × side
    cols = offsets[:, 1:] + jnp.arange(side)
    b = jnp.arange(index.shape[0])[:, None, None]
    x = x[b, rows[:, :, None], cols[:, None, :]]  # B H W C
    x = jnp.where(flips[:, None, None, None], x[:, :, ::-1], x)
    return (x.astype(jnp.float32) - mean) / std, targets[index]


class GemmConv(nn.Module):
    """flax.linen.Conv's stride-1 'same' convolution (the same parameters: an HWIO kernel
    and a bias) whose kernel gradient is computed as GEMMs (dlbench.frameworks.jax.conv):
    XLA:CPU's own kernel gradient takes ~4× as long."""

    features: int
    kernel_size: tuple[int, int]
    dtype: Any = jnp.float32

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        kernel = self.param("kernel", nn.initializers.lecun_normal(),
                            (*self.kernel_size, x.shape[-1], self.features))
        bias = self.param("bias", nn.initializers.zeros, (self.features,))
        x, kernel, bias = nn.dtypes.promote_dtype(x, kernel, bias, dtype=self.dtype)
        return conv(x, kernel) + bias


class Net(nn.Module):
    """The CNN of dlbench.catalogue.models.vision, layer for layer, NHWC (Flax's layout), computing
    in `dtype` with float32 parameters and float32 logits; on the CPU its convolutions are
    `GemmConv`s (`gemm_conv`)."""

    spec: CNN
    dtype: Any = jnp.float32
    gemm_conv: bool = False

    @nn.compact
    def __call__(self, x: jax.Array, train: bool) -> jax.Array:
        spec, k = self.spec, self.spec.kernel
        conv = partial(GemmConv, kernel_size=(k, k), dtype=self.dtype) if self.gemm_conv \
            else partial(nn.Conv, kernel_size=(k, k), padding="SAME", dtype=self.dtype)
        pool = partial(nn.max_pool, window_shape=(2, 2), strides=(2, 2))
        drop = [nn.Dropout(rate, deterministic=not train) for rate in spec.dropout]
        x = conv(spec.channels[2], name="conv2")(
            nn.relu(conv(spec.channels[1], name="conv1")(x)))
        x = drop[0](nn.relu(pool(x)))
        x = conv(spec.channels[4], name="conv4")(
            nn.relu(conv(spec.channels[3], name="conv3")(x)))
        x = drop[1](nn.relu(pool(x)))
        x = x.reshape(x.shape[0], -1)  # H, W, C order (flax_weights lays fc1 out so)
        x = drop[2](nn.relu(nn.Dense(spec.hidden, dtype=self.dtype, name="fc1")(x)))
        return nn.Dense(spec.classes, dtype=jnp.float32, name="fc2")(x)


def flax_weights(weights: dict[str, np.ndarray], spec: CNN) -> dict:
    """Canonical (PyTorch-layout) weights in Flax's: HWIO kernels, (in, out) dense kernels,
    and the first dense layer's inputs in H, W, C order (NHWC flattened), as Keras's."""
    params = {}
    for i in range(1, 5):
        params[f"conv{i}"] = {"kernel": weights[f"conv{i}.weight"].transpose(2, 3, 1, 0),
                              "bias": weights[f"conv{i}.bias"]}
    side = spec.image_size // 4
    fc1 = weights["fc1.weight"].reshape(spec.hidden, spec.channels[-1], side, side)
    fc1 = fc1.transpose(0, 2, 3, 1).reshape(spec.hidden, -1)  # C, H, W → H, W, C
    params["fc1"] = {"kernel": fc1.T, "bias": weights["fc1.bias"]}
    params["fc2"] = {"kernel": weights["fc2.weight"].T, "bias": weights["fc2.bias"]}
    return jax.tree.map(lambda a: jnp.asarray(np.ascontiguousarray(a)), params)


class Model:
    """The module, its parameters on the device and the recipe's dtype: what JAX keeps
    apart from a model object (parameters are values, updated by the step)."""

    def __init__(self, net: Net, params: dict, jit: bool):
        self.net, self.params, self.jit = net, params, jit
        apply = partial(net.apply, train=False)
        self.predict = jax.jit(apply) if jit else apply


def _parse_absl_flags() -> None:
    """Grain's worker processes read absl flags (their defaults here): a program without
    absl.app never parsed them, and reading an unparsed flag raises."""
    from absl import flags

    if not flags.FLAGS.is_parsed():
        flags.FLAGS.mark_as_parsed()


class JaxTraining:
    def __init__(self, backend):
        self.backend = backend
        self.device = backend.device
        self._caches: list[SharedImages] = []
        self._iterators: list = []
        self.seed = 0  # the cell's, from its pipeline: it seeds the steps' dropout too

    # -- model and optimizer ---------------------------------------------------------------

    def build(self, spec: CNN, weights: dict[str, np.ndarray],
              optimization: Optimization) -> Model:
        """The CNN on the device with the given (canonical-layout) weights."""
        net = Net(spec, _COMPUTE.get(optimization.precision.name, jnp.float32),
                  gemm_conv=self.device.platform == "cpu")
        params = jax.device_put(flax_weights(weights, spec), self.device)
        return Model(net, params, jit=optimization.recipe.compiled)

    def optimizer(self, model: Model, optimizer: Optimizer, learning_rate: LearningRate,
                  optimization: Optimization) -> optax.GradientTransformation:
        return make_optimizer(optimizer, schedule(learning_rate))

    # -- input pipelines ---------------------------------------------------------------------

    def pipeline(self, manifest: dict, pipeline: Pipeline, batch: int,
                 seed: int) -> "Callable[[int], Iterator]":
        """A function of the epoch that gives that epoch's batches of (images, labels),
        NHWC float32 numpy arrays from the file pipeline. The epochs follow one another
        through one Grain iterator, so that its worker processes live for the whole cell
        (as PyTorch's persistent workers)."""
        self.seed = seed
        if pipeline.in_memory:
            return self._memory_pipeline(manifest, batch, seed)
        count = len(manifest["train"])
        cache = SharedImages(count, tuple(manifest["image_shape"])) if pipeline.cache \
            else None
        if cache is not None:
            self._caches.append(cache)
        slots = EpochSlots(count, batch, seed)
        # Each slot decoded, augmented and normalised by one call, the batch stacked: no
        # thread reads ahead in a process (ReadOptions' default is 16 threads, 500
        # elements), so w0 decodes a batch only when the step asks for it.
        dataset = (grain.MapDataset.range(slots.per_epoch).repeat()
                   .map_with_index(LoadImage(manifest, slots, cache))
                   .batch(batch, drop_remainder=True)
                   .to_iter_dataset(grain.ReadOptions(num_threads=0, prefetch_buffer_size=0)))
        if pipeline.workers:  # each worker process builds whole batches, `ahead` in advance
            _parse_absl_flags()
            dataset = dataset.mp_prefetch(grain.MultiprocessingOptions(
                num_workers=pipeline.workers, per_worker_buffer_size=pipeline.ahead),
                worker_init_fn=exit_with_parent)
        iterator = iter(dataset)
        self._iterators.append(iterator)
        steps = slots.per_epoch // batch

        def epoch(_: int) -> Iterator:
            for _ in range(steps):
                yield next(iterator)

        return epoch

    def _memory_pipeline(self, manifest: dict, batch: int, seed: int):
        """The decoded training set as one array on the device; each epoch a permutation,
        and each batch gathered and augmented as a whole by one jitted function (the JAX
        way: op by op, each of its dozen operations is a dispatch of its own, 4.3 ms a batch
        of 64 on the CPU against 0.4 jitted, and 7 ms of a 10-ms step on an H200)."""
        images, labels = decode(manifest, "train")
        rng = np.random.default_rng(seed)
        n = len(labels)
        data = jax.device_put(images, self.device)
        targets = jax.device_put(labels.astype(np.int32), self.device)
        mean = jax.device_put(np.asarray(manifest["mean"], np.float32) * 255, self.device)
        std = jax.device_put(np.asarray(manifest["std"], np.float32) * 255, self.device)

        def make(index, offsets, flips):
            return jax.block_until_ready(
                _gather_augment(data, targets, index, offsets, flips, mean, std))

        # Compiled with the pipeline, not in the first step's input wait.
        make(np.arange(batch), np.zeros((batch, 2), np.int64), np.zeros(batch, bool))

        def epoch(_: int) -> Iterator:
            order = rng.permutation(n)
            for start in range(0, n - batch + 1, batch):
                offsets = rng.integers(0, 2 * PAD + 1, size=(batch, 2))
                flips = (rng.random(batch) < 0.5) & manifest["flip"]
                # Ready when handed over: augmenting is the pipeline's time (its input
                # wait), as in the others' memory pipelines on the CPU (on a GPU theirs
                # hand over a batch once queued).
                yield make(order[start:start + batch], offsets, flips)

        return epoch

    # -- the training step -------------------------------------------------------------------

    def train_step(self, model: Model, opt: optax.GradientTransformation,
                   optimization: Optimization) -> "JaxStep":
        """The training step, in parts (see dlbench.measure.training.TrainingStep)."""
        return JaxStep(model, opt, self.backend, self.seed,
                       scaled=optimization.precision.name == "fp16")

    def compilation(self) -> None:
        """torch.compile's counters: none in JAX."""
        return None

    def mean_loss(self, losses: list) -> float:
        return float(jnp.mean(jnp.stack(losses).astype(jnp.float32)))

    # -- evaluation --------------------------------------------------------------------------

    def logits(self, model: Model, images: np.ndarray, manifest: dict,
               batch: int = 500) -> np.ndarray:
        """Logits of uint8 NHWC images, normalised as in training, with dropout off."""
        mean = np.asarray(manifest["mean"], np.float32) * 255
        std = np.asarray(manifest["std"], np.float32) * 255
        out = []
        for start in range(0, len(images), batch):
            x = (images[start:start + batch].astype(np.float32) - mean) / std
            logits = model.predict({"params": model.params}, jax.device_put(x, self.device))
            out.append(np.asarray(logits, np.float32))
        return np.concatenate(out)

    # -- the end of a cell -------------------------------------------------------------------

    def release(self) -> None:
        """Leave the process as the cell found it: the Grain workers stopped, the shared
        cache freed, JAX's compiled programs dropped."""
        for iterator in self._iterators:
            if hasattr(iterator, "close"):
                iterator.close()
        for cache in self._caches:
            cache.close()
        self._iterators, self._caches = [], []
        jax.clear_caches()


class JaxStep:
    """A training step of the CNN: copy to the device, gradients (forward + loss + backward
    of a dropout key split from the step's), optimizer step (optax). Under `jit`, like
    TensorFlow's graph: the whole step is one compiled program, and timed in parts
    gradients and the optimizer step are two (the gradients then leave the first as its
    outputs). fp16 scales the loss dynamically (dlbench.frameworks.jax.optimizer). The
    parameters and the optimizer state are values the step replaces. Each
    part hands its arrays to the backend's `hold`, so that `synchronize` waits for them
    (JAX dispatches asynchronously, on the CPU too)."""

    separable = True

    def __init__(self, model: Model, opt: optax.GradientTransformation, backend, seed: int,
                 scaled: bool = False):
        self.model, self.opt, self.device, self.hold = model, opt, backend.device, backend.hold
        device, self.scaled = self.device, scaled
        self.opt_state = jax.device_put(opt.init(model.params), device)
        self.scale = jax.device_put(jnp.float32(INITIAL_SCALE if scaled else 1.0), device)
        self.good_steps = jax.device_put(jnp.int32(0), device)
        self.key = jax.device_put(jax.random.key(seed), device)
        self._grads = None
        self._gradients, self._apply = self._gradients_fn, self._apply_fn
        self._compute = self._compute_fn
        if model.jit:
            self._gradients = jax.jit(self._gradients_fn)
            self._apply = jax.jit(self._apply_fn)
            self._compute = jax.jit(self._compute_fn)

    def _loss(self, params, x, y, key):
        logits = self.model.net.apply({"params": params}, x, train=True,
                                      rngs={"dropout": key})
        return optax.softmax_cross_entropy_with_integer_labels(logits, y).mean()

    def _gradients_fn(self, params, key, scale, x, y):
        key, dropout = jax.random.split(key)

        def scaled_loss(p):
            loss = self._loss(p, x, y, dropout)
            return loss * scale, loss

        grads, loss = jax.grad(scaled_loss, has_aux=True)(params)
        return loss, grads, key

    def _apply_fn(self, params, opt_state, grads, scale, good_steps):
        if self.scaled:
            return scaled_update(self.opt, grads, opt_state, params, scale, good_steps)
        updates, opt_state = self.opt.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, scale, good_steps

    def _compute_fn(self, params, opt_state, key, scale, good_steps, x, y):
        loss, grads, key = self._gradients_fn(params, key, scale, x, y)
        return (loss, *self._apply_fn(params, opt_state, grads, scale, good_steps), key)

    def to_device(self, batch):
        x, y = batch  # numpy arrays from the files, or arrays already on the device
        return self.hold((jax.device_put(x, self.device), jax.device_put(y, self.device)))

    def forward_backward(self, x, y) -> jax.Array:
        loss, self._grads, self.key = self.hold(
            self._gradients(self.model.params, self.key, self.scale, x, y))
        return loss

    def optimizer_step(self) -> None:
        self.model.params, self.opt_state, self.scale, self.good_steps = self.hold(
            self._apply(self.model.params, self.opt_state, self._grads, self.scale,
                        self.good_steps))
        self._grads = None

    def compute(self, x, y) -> jax.Array:
        (loss, self.model.params, self.opt_state, self.scale, self.good_steps,
         self.key) = self.hold(self._compute(self.model.params, self.opt_state, self.key,
                                             self.scale, self.good_steps, x, y))
        return loss

    def __call__(self, batch) -> jax.Array:
        return self.compute(*self.to_device(batch))

    def snapshot(self) -> tuple:
        """The step's values: a step replaces them and never changes them (nothing is
        donated), so keeping them is a copy."""
        return self.model.params, self.opt_state, self.scale, self.good_steps, self.key

    def restore(self, snapshot: tuple) -> None:
        self.model.params, self.opt_state, self.scale, self.good_steps, self.key = snapshot
        self._grads = None


def make_ops(backend) -> JaxTraining:
    return JaxTraining(backend)
