"""CIFAR-10 from the standard python batches in a folder the user gives (data_batch_1 …
data_batch_5, test_batch, batches.meta): nothing is downloaded."""

import pickle
from pathlib import Path

import numpy as np

from dlbench.data import Split

TRAIN = [f"data_batch_{i}" for i in range(1, 6)]
TEST = ["test_batch"]
META = "batches.meta"
FILES = [*TRAIN, *TEST, META]
TRAIN_IMAGES = 50_000


def _batch(path: Path) -> Split:
    with open(path, "rb") as f:
        batch = pickle.load(f, encoding="bytes")
    data = np.asarray(batch[b"data"], np.uint8).reshape(-1, 3, 32, 32).transpose(0, 2, 3, 1)
    return Split(np.ascontiguousarray(data), np.asarray(batch[b"labels"], np.int64))


def check(folder: str | Path) -> Path:
    """The folder, or ValueError naming what is missing there."""
    if not str(folder).strip():
        raise ValueError("data.cifar10_dir is not set: give the folder of CIFAR-10's python "
                         f"batches ({', '.join(FILES)}), e.g. --config 'data={{cifar10_dir: "
                         "/path/to/cifar-10-batches-py}'")
    folder = Path(folder).expanduser()
    if not folder.is_dir():
        raise ValueError(f"data.cifar10_dir: {str(folder)!r} is not a folder; give the folder "
                         f"of CIFAR-10's python batches ({', '.join(FILES)})")
    missing = [name for name in FILES if not (folder / name).is_file()]
    if missing:
        raise ValueError(f"data.cifar10_dir: {folder} lacks {', '.join(missing)}; expected "
                         f"CIFAR-10's python batches: {', '.join(FILES)} (the folder "
                         "cifar-10-batches-py of cifar-10-python.tar.gz)")
    return folder


def load(folder: str | Path) -> tuple[list[str], Split, Split]:
    folder = check(folder)
    with open(folder / META, "rb") as f:
        classes = [n.decode() for n in pickle.load(f, encoding="bytes")[b"label_names"]]
    parts = [_batch(folder / name) for name in TRAIN]
    train = Split(np.concatenate([p.images for p in parts]),
                  np.concatenate([p.labels for p in parts]))
    return classes, train, _batch(folder / TEST[0])
