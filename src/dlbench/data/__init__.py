"""Training data sets as image files on disk, built once by the workflow's `dataset` rule:

    results/data/<name>/train/<class>/<n>.png, test/<class>/<n>.png, manifest.json

The manifest lists every file with its label (every framework reads exactly these, in their
own input pipelines), the classes, and the training set's per-channel mean and standard
deviation (the normalisation both apply). Sources (SOURCES): `synthetic` (generated),
`digits` (scikit-learn's bundled handwritten digits, upscaled), `cifar10` (the standard
python batches from a folder the user gives).
"""

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from dlbench.paths import MANIFEST
from dlbench.result import write_json_atomic


@dataclass(frozen=True)
class Split:
    """Images (N × H × W × 3, uint8) and their labels (N, int)."""

    images: np.ndarray
    labels: np.ndarray


def write(out: Path, name: str, classes: list[str], train: Split, test: Split,
          source: dict) -> Path:
    """The splits as PNG files in class folders under `out`, and the manifest (written
    last: a folder with a manifest is complete)."""
    from PIL import Image

    out = Path(out)
    files = {}
    for split, data in (("train", train), ("test", test)):
        entries = []
        for index, (image, label) in enumerate(zip(data.images, data.labels, strict=True)):
            relative = f"{split}/{classes[label]}/{index:06d}.png"
            (out / relative).parent.mkdir(parents=True, exist_ok=True)
            Image.fromarray(image).save(out / relative, compress_level=1)
            entries.append([relative, int(label)])
        files[split] = entries
    pixels = train.images.reshape(-1, 3).astype(np.float64) / 255.0
    manifest = {
        "dataset": name, "source": source, "classes": classes,
        "image_shape": list(train.images.shape[1:]),
        "counts": {split: len(entries) for split, entries in files.items()},
        "mean": pixels.mean(axis=0).round(6).tolist(),
        "std": pixels.std(axis=0).round(6).tolist(),
        **files,
    }
    write_json_atomic(out / MANIFEST, manifest)
    return out / MANIFEST


def train_images(dataset: str, data: dict) -> int:
    """How many training images a data set has, known before it is built (from the
    config's `data:` section, or fixed by the source)."""
    from dlbench.data import cifar10, digits

    return {"synthetic": data["synthetic_train"], "digits": digits.TRAIN_IMAGES,
            "cifar10": cifar10.TRAIN_IMAGES}[dataset]


def read_manifest(path: str | Path) -> dict:
    """A manifest, with a clear error for a folder that is not (or not yet) a data set."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no data set manifest (build it with the workflow's "
                                "dataset rule, or python -m dlbench.data)")
    manifest = json.loads(path.read_text())
    manifest["root"] = str(path.parent)
    return manifest


def decode(manifest: dict, split: str) -> tuple[np.ndarray, np.ndarray]:
    """Every image of a split, decoded with PIL (uint8 N × H × W × 3), and its labels."""
    from PIL import Image

    root, images = Path(manifest["root"]), []
    for path, _ in manifest[split]:
        with Image.open(root / path) as image:
            images.append(np.asarray(image.convert("RGB")))
    return np.stack(images), np.array([label for _, label in manifest[split]], np.int64)
