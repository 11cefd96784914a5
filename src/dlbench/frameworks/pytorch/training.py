"""PyTorch training of the CNN from image files: the model (nn.Module), its input pipelines
(Dataset + DataLoader with PIL decoding, or the decoded set in memory), the training step
under each recipe and precision, and evaluation with dropout off."""

# The backend first: it sets the environment that transformers and the framework read
# when they load.
from dlbench.frameworks.pytorch.backend import InductorCaches, PyTorchBackend  # isort: split

import copy
import signal
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from dlbench.catalogue.models.vision import CNN
from dlbench.catalogue.optimizers import LearningRate, Optimizer
from dlbench.catalogue.recipes import Optimization
from dlbench.data import decode, read_png
from dlbench.data.pipeline import PAD, LoaderDied, Pipeline
from dlbench.frameworks.pytorch import dynamo
from dlbench.measure import faults

_AUTOCAST = {"bf16": torch.bfloat16, "fp16": torch.float16}


def make_optimizer(model: torch.nn.Module, optimizer: Optimizer,
                   learning_rate: "float | torch.Tensor",
                   optimization: Optimization) -> torch.optim.Optimizer:
    """The optimizer of every PyTorch training scenario: SGD with momentum or Adam (epsilon
    1e-7, Keras's default), in the implementation the recipe names (foreach, fused; else
    PyTorch's default: a for-loop over the parameters on the CPU, foreach on CUDA)."""
    implementation = {"foreach": {"foreach": True}, "fused": {"fused": True}}.get(
        optimization.recipe.name, {})
    if optimizer.name == "sgd":
        return torch.optim.SGD(model.parameters(), lr=learning_rate,
                               momentum=optimizer.momentum, **implementation)
    return torch.optim.Adam(model.parameters(), lr=learning_rate, eps=1e-7, **implementation)


def set_rate(opt: torch.optim.Optimizer, rate: float) -> None:
    """The learning rate of the optimizer's next updates (in place where it is a tensor: a
    compiled step reads it without recompiling), as PyTorch's schedulers set it."""
    for group in opt.param_groups:
        if isinstance(group["lr"], torch.Tensor):
            group["lr"].fill_(rate)
        else:
            group["lr"] = rate


class Net(torch.nn.Module):
    """The CNN of dlbench.catalogue.models.vision, layer for layer."""

    def __init__(self, spec: CNN):
        super().__init__()
        c, k = spec.channels, spec.kernel
        self.spec = spec
        for i in range(4):
            setattr(self, f"conv{i + 1}", torch.nn.Conv2d(c[i], c[i + 1], k, padding=k // 2))
        self.fc1 = torch.nn.Linear(spec.flat, spec.hidden)
        self.fc2 = torch.nn.Linear(spec.hidden, spec.classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        drop = self.spec.dropout
        x = self.conv2(F.relu(self.conv1(x)))
        x = F.dropout(F.relu(F.max_pool2d(x, 2)), drop[0], self.training)
        x = self.conv4(F.relu(self.conv3(x)))
        x = F.dropout(F.relu(F.max_pool2d(x, 2)), drop[1], self.training)
        x = F.dropout(F.relu(self.fc1(torch.flatten(x, 1))), drop[2], self.training)
        return self.fc2(x)


class SharedCache:
    """Decoded images kept for every loader: one array in shared memory (the loader
    processes are forked after it exists), and which images it holds, as tf.data's
    `cache()` keeps the decoded set for the whole pipeline."""

    def __init__(self, count: int, shape: tuple[int, ...]):
        self.pixels = torch.zeros((count, *shape), dtype=torch.uint8).share_memory_()
        self.filled = torch.zeros(count, dtype=torch.bool).share_memory_()

    def get(self, index: int) -> np.ndarray | None:
        return self.pixels[index].numpy() if self.filled[index] else None

    def put(self, index: int, pixels: np.ndarray) -> None:
        self.pixels[index] = torch.from_numpy(pixels)
        self.filled[index] = True  # after the pixels: a reader never sees half an image


class PngDataset(torch.utils.data.Dataset):
    """The manifest's images, decoded with PIL, augmented, normalised (CHW float32)."""

    def __init__(self, root: str, entries: list, mean, std, augment: bool, flip: bool,
                 cache: SharedCache | None):
        self.root, self.entries, self.augment, self.flip = Path(root), entries, augment, flip
        self.mean = np.asarray(mean, np.float32) * 255
        self.std = np.asarray(std, np.float32) * 255
        self.cache = cache
        self.delay_s = faults.decode_delay_s()
        self.fault, self.images_read = faults.pipeline_fault(), 0

    def __len__(self) -> int:
        return len(self.entries)

    def _decode(self, index: int) -> np.ndarray:
        if self.cache is not None and (pixels := self.cache.get(index)) is not None:
            return pixels
        pixels = read_png(self.root, self.entries[index][0])  # names a damaged file
        if self.delay_s:  # a slow decoder, for tests only (dlbench.measure.faults)
            time.sleep(self.delay_s)
        if self.cache is not None:
            self.cache.put(index, pixels)
        return pixels

    def __getitem__(self, index: int):
        if self.fault and (worker := torch.utils.data.get_worker_info()) and worker.id == 0:
            self.images_read += 1  # this worker's copy of the dataset counts its own
            faults.in_loader_worker(self.fault, self.images_read)
        pixels = self._decode(index)
        if self.augment:  # torch's RNG: seeded per worker and epoch by the DataLoader
            y, x = torch.randint(0, 2 * PAD + 1, (2,)).tolist()
            padded = np.pad(pixels, ((PAD, PAD), (PAD, PAD), (0, 0)))
            pixels = padded[y:y + pixels.shape[0], x:x + pixels.shape[1]]
            if torch.rand(()) < 0.5 and self.flip:
                pixels = pixels[:, ::-1]
        normal = (pixels.astype(np.float32) - self.mean) / self.std
        return torch.from_numpy(np.ascontiguousarray(normal.transpose(2, 0, 1))), \
            self.entries[index][1]


def _report_dead_workers_as_loader_died() -> None:
    """DataLoader's SIGCHLD handler raises a RuntimeError, wherever the main process is, as
    soon as a worker dies; wrap it so that the error is a LoaderDied (a crash, not the
    cell's own failure). Once per process."""
    dataloader_handler = signal.getsignal(signal.SIGCHLD)
    if not callable(dataloader_handler) or getattr(dataloader_handler, "wrapped", False):
        return

    def handler(signum, frame):
        try:
            dataloader_handler(signum, frame)
        except RuntimeError as exc:
            raise LoaderDied(f"a loader worker died: {exc}".strip()) from exc

    handler.wrapped = True
    signal.signal(signal.SIGCHLD, handler)


class PyTorchTraining:
    def __init__(self, backend: PyTorchBackend):
        self.backend = backend
        self.device = backend.device
        self.caches = InductorCaches()
        self._compiled = False

    # -- model and optimizer ---------------------------------------------------------------

    def build(self, spec: CNN, weights: dict[str, np.ndarray],
              optimization: Optimization) -> torch.nn.Module:
        """The CNN on the device with the given (canonical-layout) weights."""
        model = Net(spec)
        model.load_state_dict({k: torch.from_numpy(v) for k, v in weights.items()})
        model = model.to(self.device)
        if optimization.recipe.name == "channels-last":
            model = model.to(memory_format=torch.channels_last)
        return model

    def optimizer(self, model: torch.nn.Module, optimizer: Optimizer,
                  learning_rate: LearningRate,
                  optimization: Optimization) -> torch.optim.Optimizer:
        # A tensor where the step is compiled whole: the program reads it, no recompiling as
        # the rate falls.
        rate = torch.tensor(learning_rate.rate) if optimization.recipe.name == "compile-step" \
            else learning_rate.rate
        opt = make_optimizer(model, optimizer, rate, optimization)
        opt.dlbench_schedule = learning_rate  # the step sets each update's rate from it
        return opt

    # -- input pipelines ---------------------------------------------------------------------

    def pipeline(self, manifest: dict, pipeline: Pipeline, batch: int,
                 seed: int) -> "Callable[[int], Iterator]":
        """A function of the epoch that gives that epoch's batches of (images, labels):
        images NCHW and contiguous from every pipeline (the step's `to_device` gives them
        the recipe's memory format)."""
        # Dropout, and the augmentation of a pipeline without workers, draw from torch's
        # global generator: the cell's seed, as TensorFlow's and JAX's steps are seeded.
        torch.manual_seed(seed)
        if pipeline.in_memory:
            return self._memory_pipeline(manifest, batch, seed)
        cache = SharedCache(len(manifest["train"]), tuple(manifest["image_shape"])) \
            if pipeline.cache else None
        dataset = PngDataset(manifest["root"], manifest["train"], manifest["mean"],
                             manifest["std"], augment=True, flip=manifest["flip"],
                             cache=cache)
        generator = torch.Generator().manual_seed(seed)
        workers = pipeline.workers
        loader = torch.utils.data.DataLoader(
            dataset, batch_size=batch, shuffle=True, drop_last=True, generator=generator,
            num_workers=workers, pin_memory=pipeline.pin, persistent_workers=workers > 0,
            prefetch_factor=pipeline.ahead or None)
        if not workers:
            return lambda epoch: iter(loader)

        def epoch(_: int) -> Iterator:
            iterator = iter(loader)  # starts the workers and DataLoader's SIGCHLD handler
            _report_dead_workers_as_loader_died()
            try:
                yield from iterator
            except LoaderDied:  # raised by the SIGCHLD handler below
                raise
            except RuntimeError as exc:  # a dead worker found while waiting for a batch
                if "DataLoader worker" in str(exc):
                    raise LoaderDied(f"a loader worker died: {exc}".strip()) from exc
                raise

        return epoch

    def _memory_pipeline(self, manifest: dict, batch: int, seed: int):
        images, labels = decode(manifest, "train")
        data = torch.from_numpy(images).permute(0, 3, 1, 2).contiguous().to(self.device)
        targets = torch.from_numpy(labels).to(self.device)
        mean = torch.tensor(manifest["mean"], device=self.device).view(1, 3, 1, 1) * 255
        std = torch.tensor(manifest["std"], device=self.device).view(1, 3, 1, 1) * 255
        generator = torch.Generator(device="cpu").manual_seed(seed)
        n, side = data.shape[0], data.shape[-1]

        def epoch(_: int) -> Iterator:
            order = torch.randperm(n, generator=generator)
            for start in range(0, n - batch + 1, batch):
                index = order[start:start + batch].to(self.device)
                offsets = torch.randint(0, 2 * PAD + 1, (batch, 2), generator=generator)
                flips = (torch.rand(batch, generator=generator) < 0.5) & manifest["flip"]
                x = F.pad(data[index], (PAD, PAD, PAD, PAD))
                rows = (offsets[:, :1] + torch.arange(side)).to(self.device)  # batch × side
                cols = (offsets[:, 1:] + torch.arange(side)).to(self.device)
                b = torch.arange(batch, device=self.device)[:, None, None]
                x = x.permute(0, 2, 3, 1)[b, rows[:, :, None], cols[:, None, :]]  # B H W C
                x = x.permute(0, 3, 1, 2)
                x = torch.where(flips.to(self.device)[:, None, None, None], x.flip(-1), x)
                # The crop gathers in NHWC: contiguous again, as every other pipeline's
                # batches (NHWC strides would run eager's convolutions channels-last).
                yield ((x.float() - mean) / std).contiguous(), targets[index]

        return epoch

    # -- the training step -------------------------------------------------------------------

    def train_step(self, model: torch.nn.Module, opt: torch.optim.Optimizer,
                   optimization: Optimization) -> "PyTorchStep":
        """The training step, in parts (see dlbench.measure.training.TrainingStep)."""
        recipe = optimization.recipe.name
        if recipe == "cudnn-benchmark":
            torch.backends.cudnn.benchmark = True
        if recipe.startswith("compile"):
            self.caches.fresh()
            dynamo.start()
            self._compiled = True
        model.train()
        return PyTorchStep(model, opt, optimization, self.device, opt.dlbench_schedule)

    def compilation(self) -> dict | None:
        """torch.compile's graphs, breaks and recompilations so far (None uncompiled)."""
        return dynamo.compilation() if self._compiled else None

    def mean_loss(self, losses: list) -> float:
        return float(torch.stack(losses).float().mean())

    # -- evaluation --------------------------------------------------------------------------

    def logits(self, model: torch.nn.Module, images: np.ndarray, manifest: dict,
               batch: int = 500) -> np.ndarray:
        """Logits of uint8 NHWC images, normalised as in training, with dropout off."""
        mean = np.asarray(manifest["mean"], np.float32) * 255
        std = np.asarray(manifest["std"], np.float32) * 255
        was_training = model.training
        model.eval()
        out = []
        with torch.inference_mode():
            for start in range(0, len(images), batch):
                x = (images[start:start + batch].astype(np.float32) - mean) / std
                x = torch.from_numpy(x.transpose(0, 3, 1, 2).copy()).to(self.device)
                out.append(model(x).float().cpu().numpy())
        model.train(was_training)
        return np.concatenate(out)

    # -- the end of a cell -------------------------------------------------------------------

    def release(self) -> None:
        """Leave the process as the cell found it."""
        self.caches.release()
        torch.backends.cudnn.benchmark = False


class PyTorchStep:
    """A training step of the CNN: copy to the device, forward + loss + backward, optimizer
    step (a gradient scaler in fp16). Losses are device tensors, never read here, so that
    nothing waits for the device that the measurement does not ask to wait for."""

    def __init__(self, model, opt, optimization: Optimization, device, rate: LearningRate):
        recipe = optimization.recipe.name
        self.model, self.opt, self.device = model, opt, device
        self.rate, self.updates = rate, 0
        self.dtype = _AUTOCAST.get(optimization.precision.name)
        self.scaler = torch.amp.GradScaler(device.type) if self.dtype == torch.float16 \
            else None
        self.memory_format = torch.channels_last if recipe == "channels-last" \
            else torch.contiguous_format  # the recipe's layout, whatever the pipeline's
        self.forward = torch.compile(model) if recipe == "compile" else model
        # torch.compile of the whole step: forward, backward and optimizer are one program.
        self.separable = recipe != "compile-step"
        self.program = torch.compile(self._compute) if not self.separable else self._compute

    def to_device(self, batch):
        x, y = batch
        x = x.to(self.device, non_blocking=True).contiguous(memory_format=self.memory_format)
        return x, y.to(self.device, non_blocking=True)

    def forward_backward(self, x, y) -> torch.Tensor:
        with torch.autocast(self.device.type, dtype=self.dtype, enabled=self.dtype is not None):
            loss = F.cross_entropy(self.forward(x), y)
        self.opt.zero_grad(set_to_none=True)
        (loss if self.scaler is None else self.scaler.scale(loss)).backward()
        return loss.detach()

    def optimizer_step(self) -> None:
        self._next_rate()
        self._update()

    def _next_rate(self) -> None:
        """The schedule's rate for the coming update, set outside any compiled program."""
        set_rate(self.opt, self.rate.at(self.updates))
        self.updates += 1

    def _update(self) -> None:
        if self.scaler is None:
            self.opt.step()
        else:
            self.scaler.step(self.opt)
            self.scaler.update()

    def _compute(self, x, y) -> torch.Tensor:
        loss = self.forward_backward(x, y)
        self._update()
        return loss

    def compute(self, x, y) -> torch.Tensor:
        self._next_rate()
        return self.program(x, y)

    def __call__(self, batch) -> torch.Tensor:
        return self.compute(*self.to_device(batch))

    def _parameters(self) -> list[torch.Tensor]:
        return [p for group in self.opt.param_groups for p in group["params"]]

    def snapshot(self) -> dict:
        """Copies of the weights and buffers, the optimizer's per-parameter state, the count
        of updates (the schedule's rate follows it), the gradient scaler's state and the
        random state dropout draws from."""
        return {
            "tensors": [t.clone() for t in self.model.state_dict().values()],
            "optimizer": [{k: _copy(v) for k, v in self.opt.state[p].items()}
                          for p in self._parameters()],
            "updates": self.updates,
            "scaler": None if self.scaler is None else self.scaler.state_dict(),
            "rng": torch.get_rng_state(),
            "device_rng": torch.cuda.get_rng_state(self.device)
            if self.device.type == "cuda" else None,
        }

    def restore(self, snapshot: dict) -> None:
        """In place, tensor by tensor: compiled programs keep reading the same tensors."""
        tensors = list(self.model.state_dict().values())
        for tensor, saved in zip(tensors, snapshot["tensors"], strict=True):
            tensor.copy_(saved)
        for p, saved in zip(self._parameters(), snapshot["optimizer"], strict=True):
            state = self.opt.state[p]
            for key, value in saved.items():
                if torch.is_tensor(value) and torch.is_tensor(state.get(key)):
                    state[key].copy_(value)
                else:
                    state[key] = _copy(value)
            for key in set(state) - set(saved):
                del state[key]
        self.updates = snapshot["updates"]
        if self.scaler is not None:
            self.scaler.load_state_dict(snapshot["scaler"])
        torch.set_rng_state(snapshot["rng"])
        if snapshot["device_rng"] is not None:
            torch.cuda.set_rng_state(snapshot["device_rng"], self.device)


def _copy(value):
    return value.detach().clone() if torch.is_tensor(value) else copy.deepcopy(value)


def make_ops(backend: PyTorchBackend) -> PyTorchTraining:
    return PyTorchTraining(backend)
