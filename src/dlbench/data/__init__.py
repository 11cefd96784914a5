"""Training data sets as image files on disk, built once by the workflow's `dataset` rule:

    results/data/<name>/train/<class>/<n>.png, test/<class>/<n>.png, manifest.json

The manifest lists every file with its label (every framework reads exactly these, in their
own input pipelines), the classes, the training set's per-channel mean and standard
deviation (the normalisation both apply), whether the augmentation may flip its images
(`flip`), and each file's size and CRC-32 (`integrity`).
Sources (SOURCES): `synthetic` (generated), `digits` (scikit-learn's bundled handwritten
digits, upscaled), `cifar10` (the standard python batches from a folder the user gives).

A damaged set — a file missing, truncated or changed, the manifest edited — is found and
named file by file: by its sizes before a cell trains (`check`: no file is read, so the
page cache stays as the cell finds it), by its checksums with `python -m dlbench.data
--check`, and by every loader when an image does not decode (`read_png`).
"""

import io
import json
import shutil
import zlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from dlbench.files.atomic import write_json_atomic
from dlbench.files.paths import MANIFEST

SPLITS = ("train", "test")
MANIFEST_KEYS = ("dataset", "classes", "image_shape", "counts", "mean", "std", "flip",
                 *SPLITS)


@dataclass(frozen=True)
class Split:
    """Images (N × H × W × 3, uint8) and their labels (N, int)."""

    images: np.ndarray
    labels: np.ndarray


class DataSetError(ValueError):
    """A data set that does not match its manifest; the message names the files."""

    def __init__(self, message: str):
        # PyTorch's DataLoader re-raises a worker's exception as its type, with the worker's
        # traceback in the message: keep the message that names the file.
        if "Traceback" in message and f"{type(self).__name__}: " in message:
            message = message.rstrip().rsplit(f"{type(self).__name__}: ", 1)[1]
        super().__init__(message)


def write(out: Path, name: str, classes: list[str], train: Split, test: Split,
          source: dict, flip: bool = True) -> Path:
    """The splits as PNG files in class folders under `out`, and the manifest, with each
    file's size and CRC-32. Written beside `out` and moved into place at the end, so that an
    interrupted build leaves no half set and a rebuild no stale files."""
    from PIL import Image

    out = Path(out)
    if out.exists() and any(out.iterdir()) and not (out / MANIFEST).exists():
        raise ValueError(f"{out} holds files but no data set manifest: give a new folder")
    staging = out.with_name(f".{out.name}.building")
    shutil.rmtree(staging, ignore_errors=True)
    files, integrity = {}, {}
    for split, data in (("train", train), ("test", test)):
        entries, records = [], []
        for index, (image, label) in enumerate(zip(data.images, data.labels, strict=True)):
            relative = f"{split}/{classes[label]}/{index:06d}.png"
            png = io.BytesIO()
            Image.fromarray(image).save(png, format="PNG", compress_level=1)
            (staging / relative).parent.mkdir(parents=True, exist_ok=True)
            (staging / relative).write_bytes(png.getvalue())
            entries.append([relative, int(label)])
            records.append([len(png.getvalue()), zlib.crc32(png.getvalue())])
        files[split], integrity[split] = entries, records
    pixels = train.images.reshape(-1, 3).astype(np.float64) / 255.0
    manifest = {
        "dataset": name, "source": source, "classes": classes,
        "image_shape": list(train.images.shape[1:]),
        "counts": {split: len(entries) for split, entries in files.items()},
        "mean": pixels.mean(axis=0).round(6).tolist(),
        "std": pixels.std(axis=0).round(6).tolist(),
        "flip": flip,  # whether the augmentation may mirror an image (dlbench.data.pipeline)
        **files,
        "integrity": integrity,  # per split, per file: [bytes, CRC-32]
    }
    write_json_atomic(staging / MANIFEST, manifest)
    if out.exists():
        shutil.rmtree(out)
    staging.rename(out)
    return out / MANIFEST


def repair_hint(root: str | Path, name: str = "<name>") -> str:
    """What to do about a damaged set, for the end of a message."""
    return (f"the data set {root} is damaged: the workflow builds it again before the next "
            "cell that reads it (delete this cell's result to measure it again), or "
            f"python -m dlbench.data --dataset {name} --out {root} --repair")


def read_manifest(path: str | Path) -> dict:
    """A manifest, with a clear error for a folder that is not (or not yet) a data set, or
    a manifest that is not one any more (DataSetError)."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no data set manifest (build it with the workflow's "
                                "dataset rule, or python -m dlbench.data)")
    try:
        manifest = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise DataSetError(f"{path}: not valid JSON ({exc}); {repair_hint(path.parent)}") \
            from None
    missing = [key for key in MANIFEST_KEYS if not isinstance(manifest, dict)
               or key not in manifest]
    if missing:
        raise DataSetError(f"{path}: lacks {', '.join(missing)}; {repair_hint(path.parent)}")
    manifest["root"] = str(path.parent)
    return manifest


def damage(manifest: dict, checksums: bool = False) -> list[str]:
    """What in the folder no longer matches its manifest, one line per file: listed but
    missing, of another size than it was written with (truncated, replaced) or, with
    checksums (which reads every file), another CRC-32; a label outside the classes; image
    files it does not list; counts it does not hold. Sets built before sizes were recorded
    are checked for missing files only."""
    root, problems = Path(manifest["root"]), []
    classes = len(manifest["classes"])
    for split in SPLITS:
        entries = manifest[split]
        records = manifest.get("integrity", {}).get(split)
        if len(entries) != manifest["counts"].get(split):
            problems.append(f"the manifest lists {len(entries)} {split} images, its counts "
                            f"say {manifest['counts'].get(split)}")
        if records is not None and len(records) != len(entries):
            problems.append(f"the manifest lists {len(entries)} {split} images and the sizes "
                            f"of {len(records)}")
            records = None
        for index, entry in enumerate(entries):
            if not (isinstance(entry, list) and len(entry) == 2 and isinstance(entry[0], str)
                    and isinstance(entry[1], int)):
                problems.append(f"the manifest's {split} entry {index}, {entry!r}, is not "
                                "[file, label]")
                continue
            path, label = entry
            file = root / path
            if not 0 <= label < classes:
                problems.append(f"{file}: label {label} in the manifest, outside its "
                                f"{classes} classes")
            try:
                size = file.stat().st_size
            except FileNotFoundError:
                problems.append(f"{file}: listed in the manifest, missing")
                continue
            if records is None:
                continue
            expected, crc = records[index]
            if size != expected:
                problems.append(f"{file}: {size} bytes, written with {expected} (truncated "
                                "or replaced)")
            elif checksums and zlib.crc32(file.read_bytes()) != crc:
                problems.append(f"{file}: its content changed since it was written (CRC-32)")
    listed = {entry[0] for split in SPLITS for entry in manifest[split]
              if isinstance(entry, list) and entry}
    problems += [f"{file}: an image the manifest does not list" for file in
                 sorted(root.rglob("*.png")) if file.relative_to(root).as_posix() not in listed]
    return problems


def check(manifest: dict, checksums: bool = False) -> None:
    """DataSetError naming what does not match the manifest (see `damage`)."""
    problems = damage(manifest, checksums)
    if problems:
        shown = "; ".join(problems[:5]) + (f"; and {len(problems) - 5} more"
                                            if len(problems) > 5 else "")
        raise DataSetError(f"{shown}; {repair_hint(manifest['root'], manifest['dataset'])}")


def folder_damage(folder: str | Path) -> list[str]:
    """What is wrong with a data set folder (sizes only, no file read); [] for one that is
    intact or not there at all (it will be built)."""
    folder = Path(folder)
    if not folder.exists():
        return []
    try:
        return damage(read_manifest(folder / MANIFEST))
    except (FileNotFoundError, DataSetError) as exc:
        return [str(exc)]


def read_png(root: str | Path, relative: str) -> np.ndarray:
    """One image of a data set, decoded with PIL (uint8 H × W × 3); DataSetError naming the
    file where it cannot be (what every loader reads through)."""
    from PIL import Image

    file = Path(root) / relative
    try:
        with Image.open(file) as image:
            return np.asarray(image.convert("RGB"))
    except FileNotFoundError:
        raise DataSetError(f"{file}: listed in the manifest, missing; {repair_hint(root)}") \
            from None
    except (OSError, SyntaxError, ValueError, EOFError, zlib.error) as exc:
        raise DataSetError(f"{file}: not a readable PNG ({type(exc).__name__}: {exc}); "
                           f"{repair_hint(root)}") from None


def damaged_file_error(manifest: dict, error: Exception) -> Exception:
    """A DataSetError naming the first file of the set that does not decode, for a loader
    whose own error does not name it (tf.data's decode_png); the error itself where every
    file decodes (it was not the data set's). Reads the set: for a failure only."""
    root = manifest["root"]
    for split in SPLITS:
        for path, _ in manifest[split]:
            try:
                read_png(root, path)
            except DataSetError as damaged:
                first = str(error).strip().splitlines()[0] if str(error).strip() else ""
                return DataSetError(f"{damaged} (the loader said: {type(error).__name__}: "
                                    f"{first})")
    return error


def decode(manifest: dict, split: str) -> tuple[np.ndarray, np.ndarray]:
    """Every image of a split, decoded with PIL (uint8 N × H × W × 3), and its labels."""
    images = [read_png(manifest["root"], path) for path, _ in manifest[split]]
    return np.stack(images), np.array([label for _, label in manifest[split]], np.int64)
