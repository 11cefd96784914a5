"""Input-pipeline settings of a training cell, named as they read in its id.

    memory              the whole decoded training set as one array on the device (the
                        published setup): each batch gathered and augmented from it
    w<N>[-p<M>][-cache][-pin]
                        the framework's own pipeline over the PNG files: N loaders (PyTorch
                        DataLoader worker processes; tf.data parallel calls of the map that
                        decodes and augments one image), each preparing M batches ahead
                        (default 2, PyTorch's prefetch_factor; tf.data prefetches N × M
                        batches), decoded images kept for every loader once decoded (one
                        shared array in both), pinned host memory (GPU).
                        JAX: Grain's MapDataset with N spawned worker processes, each
                        building whole batches, `per_worker_buffer_size` M.
                        w0: the main process decodes each batch when the step asks for it,
                        nothing is prepared ahead. tf.data runs without its default
                        optimizations (map_and_batch_fusion's thread would build the next
                        batch during the step) and without autotuning, for every w<N>.

Every pipeline applies the same augmentation: a random 32×32 crop of the image padded by 4
(zeros), a horizontal flip with probability 1/2 where the data set allows it (its
manifest's `flip`: not the digits, whose mirror images are no digits), and normalisation
with the training set's per-channel mean and standard deviation; and hands the model the
layout its recipe names (PyTorch: NCHW, channels_last for `channels-last`; TensorFlow:
NHWC, NCHW for `channels-first`; JAX: NHWC).
"""

import re
from dataclasses import dataclass

from dlbench.catalogue import frameworks

PATTERN = r"^(memory|w(\d+)(-p(\d+))?(-cache)?(-pin)?)$"
EXPECTED = ("'memory' or w<workers>[-p<prefetch>][-cache][-pin], e.g. w0, w2, w2-p4-cache "
            "(see config/README.md, Pipelines)")
# More loader processes than any machine here has cores: a typo (w20 for w2), not a setting.
MAX_WORKERS = 256
PAD = 4


class LoaderDied(RuntimeError):
    """A loader worker process of the input pipeline died (killed, crashed). Not the cell's
    own failure: it is recorded as a crash, and a re-run measures the cell again."""


@dataclass(frozen=True)
class Pipeline:
    name: str
    in_memory: bool = False
    workers: int = 0
    prefetch: int | None = None  # batches each loader prepares ahead (None: 2 with loaders)
    cache: bool = False
    pin: bool = False

    def describe(self) -> dict:
        return {"name": self.name, "in_memory": self.in_memory, "workers": self.workers,
                "prefetch": self.prefetch, "cache": self.cache, "pin_memory": self.pin}

    def unsupported_reason(self, framework: str, device: str) -> str | None:
        if self.pin and device != "gpu":
            return (f"pipeline '{self.name}': pinned memory speeds up copies to a GPU; "
                    "there is none")
        no_pinning = frameworks.get(framework).no_pinned_memory
        if self.pin and no_pinning:
            return f"pipeline '{self.name}': {no_pinning}"
        if self.prefetch is not None and self.workers == 0:
            return (f"pipeline '{self.name}': batches are prepared ahead by loaders; with 0 "
                    "workers there are none (PyTorch's prefetch_factor needs num_workers > 0)")
        return None

    @property
    def ahead(self) -> int:
        """Batches each loader prepares ahead."""
        return 0 if not self.workers else (self.prefetch or 2)


def variants(device: str = "cpu") -> list[str]:
    """One name of every kind the grammar allows on a device: memory, and 0 or 2 workers,
    each with and without a cache, prefetch depth (with workers) and pinning (GPU)."""
    names = ["memory"]
    for workers in (0, 2):
        for prefetch in ("", "-p3") if workers else ("",):
            for cache in ("", "-cache"):
                for pin in ("", "-pin") if device == "gpu" else ("",):
                    names.append(f"w{workers}{prefetch}{cache}{pin}")
    return names


def problem(name: str) -> str | None:
    """What is wrong with a name of the right form (a prefetch depth of 0, a number of
    loaders no machine has), or None."""
    pipeline = parse(name)
    if pipeline.workers > MAX_WORKERS:
        return (f"{pipeline.workers} loaders (more than {MAX_WORKERS}): give at most the "
                "machine's cores, e.g. w2")
    if pipeline.prefetch == 0:
        return ("-p0 prepares nothing ahead: give a prefetch depth of 1 or more, or leave "
                "-p<prefetch> out (2)")
    return None


def parse(name: str) -> Pipeline:
    match = re.match(PATTERN, name)
    if match is None:
        raise ValueError(f"pipeline {name!r}: expected {EXPECTED}")
    if match.group(1) == "memory":
        return Pipeline(name, in_memory=True)
    return Pipeline(name, workers=int(match.group(2)),
                    prefetch=int(match.group(4)) if match.group(4) else None,
                    cache=bool(match.group(5)), pin=bool(match.group(6)))
