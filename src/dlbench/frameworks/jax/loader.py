"""The per-image work of a file pipeline in numpy, for loaders in other processes that are
handed it by pickling (Grain's workers are spawned, not forked): which image each slot of
an epoch holds, decoding it with PIL, augmenting and normalising it — what PyTorch's
PngDataset does per image. It imports no framework, so that a worker process does not
pay one's import (or its memory) to decode images.
"""

import time
from multiprocessing import shared_memory
from pathlib import Path

import numpy as np

from dlbench.data import read_png
from dlbench.data.pipeline import PAD
from dlbench.measure import faults


class SharedImages:
    """Decoded images kept for every loader process, filled as images are first decoded:
    one array in shared memory (as PyTorch's SharedCache), attached by name in a worker."""

    def __init__(self, count: int, shape: tuple[int, ...]):
        self.count, self.shape = count, tuple(shape)
        size = count * int(np.prod(shape)) + count  # the pixels, then a filled flag each
        self._memory = shared_memory.SharedMemory(create=True, size=size)
        self._owner = True
        self._views()

    def _views(self) -> None:
        pixels = self.count * int(np.prod(self.shape))
        self.pixels = np.ndarray((self.count, *self.shape), np.uint8, self._memory.buf)
        self.filled = np.ndarray((self.count,), np.uint8, self._memory.buf, offset=pixels)

    def __getstate__(self) -> dict:
        return {"name": self._memory.name, "count": self.count, "shape": self.shape}

    def __setstate__(self, state: dict) -> None:
        self.count, self.shape, self._owner = state["count"], state["shape"], False
        # Spawned workers share their parent's resource tracker: attaching registers the
        # name once more (a set), and the creating process alone unlinks it.
        self._memory = shared_memory.SharedMemory(state["name"])
        self._views()

    def get(self, index: int) -> np.ndarray | None:
        return self.pixels[index] if self.filled[index] else None

    def put(self, index: int, pixels: np.ndarray) -> None:
        self.pixels[index] = pixels
        self.filled[index] = 1  # after the pixels: a reader never sees half an image

    def close(self) -> None:
        """Free the memory (in the process that created it)."""
        del self.pixels, self.filled
        self._memory.close()
        if self._owner:
            self._memory.unlink()


class EpochSlots:
    """Slot s of an endless sequence of epochs → the image it holds: each epoch a fresh
    permutation of the images (from the seed and the epoch), its last partial batch left
    out (drop_last), as PyTorch's shuffled sampler."""

    def __init__(self, count: int, batch: int, seed: int):
        self.count, self.seed = count, seed
        self.per_epoch = count // batch * batch
        self._order: tuple[int, np.ndarray] | None = None

    def __call__(self, slot: int) -> int:
        epoch, position = divmod(slot, self.per_epoch)
        if self._order is None or self._order[0] != epoch:
            rng = np.random.default_rng((self.seed, epoch))
            self._order = (epoch, rng.permutation(self.count))
        return int(self._order[1][position])


class LoadImage:
    """Slot → (normalised float32 H × W × 3 image, label): the slot's image decoded (or
    read from the shared cache), padded by PAD and cropped at random, flipped with
    probability 1/2 where the data set allows it — the randomness from the seed and the
    slot, so that it does not depend on which worker loads it."""

    def __init__(self, manifest: dict, slots: EpochSlots, cache: SharedImages | None):
        self.root, self.entries, self.slots, self.cache = (
            Path(manifest["root"]), manifest["train"], slots, cache)
        self.mean = np.asarray(manifest["mean"], np.float32) * 255
        self.std = np.asarray(manifest["std"], np.float32) * 255
        self.delay_s = faults.decode_delay_s()
        self.flip = manifest["flip"]

    def decode(self, index: int) -> np.ndarray:
        if self.cache is not None and (pixels := self.cache.get(index)) is not None:
            return pixels
        pixels = read_png(self.root, self.entries[index][0])  # names a damaged file
        if self.delay_s:  # a slow decoder, for tests only (dlbench.measure.faults)
            time.sleep(self.delay_s)
        if self.cache is not None:
            self.cache.put(index, pixels)
        return pixels

    def __call__(self, slot: int, _: object = None) -> tuple[np.ndarray, np.int32]:
        index = self.slots(slot)
        pixels = self.decode(index)
        rng = np.random.default_rng((self.slots.seed, slot, 1))
        y, x = rng.integers(0, 2 * PAD + 1, 2)
        padded = np.pad(pixels, ((PAD, PAD), (PAD, PAD), (0, 0)))
        pixels = padded[y:y + pixels.shape[0], x:x + pixels.shape[1]]
        if rng.random() < 0.5 and self.flip:
            pixels = pixels[:, ::-1]
        return (pixels.astype(np.float32) - self.mean) / self.std, \
            np.int32(self.entries[index][1])


def exit_with_parent(worker: int = 0, workers: int = 0, poll_s: float = 0.5) -> None:
    """In a loader process: end it when the process that started it is gone (killed, or
    ended with os._exit), as PyTorch's DataLoader workers do; Grain's spawned workers
    would otherwise outlive it, holding its output pipes open."""
    import os
    import threading

    parent = os.getppid()

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(poll_s)
        os._exit(0)

    threading.Thread(target=watch, name="exit-with-parent", daemon=True).start()
