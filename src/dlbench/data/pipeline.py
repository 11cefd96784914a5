"""Input-pipeline settings of a training cell, named as they read in its id.

    memory              the whole decoded training set as one array (the published setup;
                        the upper bound of any pipeline): batches are sliced from it
    w<N>[-p<M>][-cache][-pin]
                        the framework's own pipeline over the PNG files: N loaders (PyTorch
                        DataLoader worker processes; tf.data parallel calls of the decoding
                        map), each preparing M batches ahead (default 2, PyTorch's
                        prefetch_factor; tf.data prefetches N × M batches), decoded images
                        cached in memory after the first epoch, pinned host memory (GPU).
                        w0: the main process decodes each batch when the step asks for it,
                        nothing is prepared ahead (tf.data's injected prefetch is off)

Every pipeline applies the same augmentation: a random 32×32 crop of the image padded by 4
(zeros), a horizontal flip with probability 1/2, and normalisation with the training set's
per-channel mean and standard deviation.
"""

import re
from dataclasses import dataclass

PATTERN = r"^(memory|w(\d+)(-p(\d+))?(-cache)?(-pin)?)$"
PAD = 4


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
        if self.pin and framework == "tensorflow":
            return (f"pipeline '{self.name}': pinned memory is a PyTorch DataLoader option; "
                    "tf.data has none")
        if self.prefetch is not None and self.workers == 0:
            return (f"pipeline '{self.name}': batches are prepared ahead by loaders; with 0 "
                    "workers there are none (PyTorch's prefetch_factor needs num_workers > 0)")
        return None

    @property
    def ahead(self) -> int:
        """Batches each loader prepares ahead."""
        return 0 if not self.workers else (self.prefetch or 2)


def parse(name: str) -> Pipeline:
    match = re.match(PATTERN, name)
    if match is None:
        raise ValueError(f"pipeline {name!r}: expected 'memory' or w<workers>[-p<prefetch>]"
                         "[-cache][-pin], e.g. w0, w2, w2-p4-cache")
    if match.group(1) == "memory":
        return Pipeline(name, in_memory=True)
    return Pipeline(name, workers=int(match.group(2)),
                    prefetch=int(match.group(4)) if match.group(4) else None,
                    cache=bool(match.group(5)), pin=bool(match.group(6)))
