"""A damaged training data set, planted for real in a tiny set of real PNG files: a file
truncated, deleted or changed in place, the manifest edited or broken. Each is named —
before training by a check of the manifest against the files (sizes; checksums on demand),
at the first read by every framework's loader otherwise —, the cell records `error` with
that reason, `python -m dlbench.data --repair` builds the set again, and the workflow
notices a damaged set and rebuilds it."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from dlbench.data import DataSetError, check, damage, folder_damage, read_manifest, read_png
from dlbench.data import __main__ as data_cli
from dlbench.records import result
from tests.conftest import snakemake, tool_env

TRAIN, TEST = 20, 10  # 2 and 1 images of each class: every batch of 4 reads every image


@pytest.fixture
def tiny_set(tmp_path) -> dict:
    """A real synthetic data set (its manifest, with its folder as root)."""
    return read_manifest(data_cli.build("synthetic", tmp_path / "synthetic", TRAIN, TEST, 0))


def file_of(manifest: dict, index: int = 3, split: str = "train") -> Path:
    return Path(manifest["root"]) / manifest[split][index][0]


def truncate(manifest) -> Path:
    path = file_of(manifest)
    path.write_bytes(path.read_bytes()[:path.stat().st_size // 2])
    return path


def delete(manifest) -> Path:
    path = file_of(manifest, 0, "test")
    path.unlink()
    return path


def corrupt_in_place(manifest) -> Path:
    """The same size, other bytes: only a checksum or the decoder can tell."""
    path = file_of(manifest)
    data = bytearray(path.read_bytes())
    data[200:260] = bytes(60)
    path.write_bytes(bytes(data))
    return path


def edit_manifest(manifest, change) -> Path:
    path = Path(manifest["root"]) / "manifest.json"
    raw = json.loads(path.read_text())
    change(raw)
    path.write_text(json.dumps(raw))
    return path


def rename_an_entry(manifest):
    edit_manifest(manifest, lambda raw: raw["train"][5].__setitem__(0, "train/x/gone.png"))
    return Path(manifest["root"]) / "train/x/gone.png"


def drop_an_entry(manifest):
    # The file is still there, the manifest no longer lists it.
    edit_manifest(manifest, lambda raw: raw["train"].pop(7))
    return file_of(manifest, 7)


def label_out_of_range(manifest):
    edit_manifest(manifest, lambda raw: raw["train"][2].__setitem__(1, 10))
    return file_of(manifest, 2)


def break_the_manifest(manifest) -> Path:
    path = Path(manifest["root"]) / "manifest.json"
    path.write_text(path.read_text()[:100])
    return path


def reread(manifest: dict) -> dict:
    return read_manifest(Path(manifest["root"]) / "manifest.json")


@pytest.mark.parametrize(("plant", "said"), [
    (truncate, "bytes, written with"),
    (delete, "listed in the manifest, missing"),
    (rename_an_entry, "listed in the manifest, missing"),
    (drop_an_entry, "an image the manifest does not list"),
    (label_out_of_range, "label 10 in the manifest, outside its 10 classes"),
])
def test_the_check_before_training_names_the_file(tiny_set, plant, said):
    assert damage(tiny_set, checksums=True) == []
    named = plant(tiny_set)
    with pytest.raises(DataSetError) as caught:
        check(reread(tiny_set))
    message = str(caught.value)
    assert f"{named}: " in message and said in message
    assert "python -m dlbench.data --dataset synthetic --out" in message  # how to repair
    assert folder_damage(tiny_set["root"])  # the workflow's view: damaged


def test_a_broken_manifest_is_named(tiny_set):
    named = break_the_manifest(tiny_set)
    with pytest.raises(DataSetError, match=f"{named}: not valid JSON"):
        reread(tiny_set)
    assert "not valid JSON" in folder_damage(tiny_set["root"])[0]


def test_a_change_of_the_same_size_is_found_by_its_checksum_and_at_decoding(tiny_set):
    named = corrupt_in_place(tiny_set)
    assert damage(tiny_set) == []  # the sizes match: the cheap check cannot see it
    assert damage(tiny_set, checksums=True) == [
        f"{named}: its content changed since it was written (CRC-32)"]
    with pytest.raises(DataSetError, match=f"{named}: not a readable PNG"):
        read_png(tiny_set["root"], tiny_set["train"][3][0])


def test_an_intact_or_absent_set_is_not_damaged(tiny_set, tmp_path):
    assert folder_damage(tiny_set["root"]) == []
    assert folder_damage(tmp_path / "not-built-yet") == []
    # A set built before sizes were recorded: checked for missing files only.
    edit_manifest(tiny_set, lambda raw: raw.pop("integrity"))
    assert damage(reread(tiny_set)) == []
    delete(tiny_set)
    assert "missing" in damage(reread(tiny_set))[0]


def test_the_command_line_checks_and_repairs(tiny_set, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("DLBENCH_LOCK_DIR", str(tmp_path))  # no wait for others' cells
    folder = tiny_set["root"]
    build = ["--dataset=synthetic", f"--out={folder}", f"--train={TRAIN}", f"--test={TEST}"]
    named = corrupt_in_place(tiny_set)
    assert data_cli.main([f"--out={folder}", "--check"]) == 1
    assert f"{named}: its content changed" in capsys.readouterr().err
    assert data_cli.main([*build, "--repair"]) == 0
    assert "building" in capsys.readouterr().err
    assert data_cli.main([f"--out={folder}", "--check"]) == 0
    assert "intact" in capsys.readouterr().out
    before = (tmp_path / "synthetic" / "manifest.json").stat().st_mtime_ns
    assert data_cli.main([*build, "--repair"]) == 0  # intact: nothing built
    assert (tmp_path / "synthetic" / "manifest.json").stat().st_mtime_ns == before
    assert not list(tmp_path.glob(".synthetic.building"))


LOADERS = """
import json
from dlbench.data import DataSetError, read_manifest
from dlbench.data.pipeline import parse
from dlbench.frameworks import load_backend, load_ops

ops = load_ops(load_backend({framework!r}, "cpu", 1, 1), "training")
manifest = read_manifest({manifest!r})
said = {{}}
for name in {pipelines!r}:
    try:
        for batch in ops.pipeline(manifest, parse(name), 4, 0)(0):
            pass
        said[name] = "read every batch"
    except DataSetError as exc:
        said[name] = str(exc)
    except Exception as exc:
        said[name] = f"not a DataSetError: {{type(exc).__name__}}: {{exc}}"
ops.release()
print("SAID", json.dumps(said))
"""


@pytest.mark.parametrize(("framework", "pipelines"), [
    ("pytorch", ["w0", "w2", "memory"]),
    ("tensorflow", ["w0", "w2-cache", "memory"]),
    ("jax", ["w0", "w2", "memory"]),
])
def test_every_loader_names_a_file_that_does_not_decode(tiny_set, framework, pipelines):
    """Damage that the check before training cannot see (the same size) fails at the first
    read, in the main process or a loader's worker, with the file's name."""
    named = corrupt_in_place(tiny_set)
    code = LOADERS.format(framework=framework, manifest=tiny_set["root"] + "/manifest.json",
                          pipelines=pipelines)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=300, env=tool_env())
    assert done.returncode == 0, done.stderr[-3000:]
    said = json.loads(done.stdout.split("SAID ", 1)[1])
    for name in pipelines:
        assert said[name].startswith(f"{named}: not a readable PNG"), (name, said[name])
        assert "Traceback" not in said[name]


def test_the_cell_records_error_naming_the_file(tiny_set, tmp_path):
    named = truncate(tiny_set)
    out = tmp_path / "cell.json"
    done = subprocess.run(
        [sys.executable, "-m", "dlbench", "run", "--scenario=training", "--framework=pytorch",
         "--model=cnn", "--device=cpu", "--batch=4", "--dataset=synthetic", "--pipeline=w0",
         "--optimizer=sgd", "--optimization=eager", "--epochs=1",
         f"--data={tiny_set['root']}", f"--out={out}"],
        capture_output=True, text=True, timeout=300,
        env=tool_env(DLBENCH_LOCK_DIR=str(tmp_path)))
    assert done.returncode == 0, done.stderr[-3000:]
    record = result.read(out)
    assert record["status"] == "error"
    assert record["reason"].startswith(f"DataSetError: {named}: ")


def test_the_workflow_rebuilds_a_damaged_set(tmp_path):
    """A dry run: the damaged set is moved aside and the dataset rule planned for it."""
    data = tmp_path / "results" / "data" / "synthetic"
    manifest = read_manifest(data_cli.build("synthetic", data, TRAIN, TEST, 0))
    matrix = {"frameworks": ["pytorch"], "devices": ["cpu"],
              "data": {"synthetic_train": TRAIN, "synthetic_test": TEST},
              "training": {"models": ["cnn"], "datasets": ["synthetic"], "batch_sizes": [4],
                           "pipelines": ["w0"], "optimizers": ["sgd"],
                           "optimizations": ["eager"], "epochs": 1}}
    truncate(manifest)
    run = snakemake(tmp_path, matrix, "--cores", "1", "--dry-run", "results/data/synthetic")
    assert run.returncode == 0, run.stderr[-3000:]
    output = run.stdout + run.stderr
    named = f"results/data/synthetic/{manifest['train'][3][0]}"
    assert (f"results/data/synthetic is damaged, building it again (the damaged one is kept "
            f"in results/data/.synthetic.damaged): {named}: ") in output
    assert "rule dataset:" in output
    assert (tmp_path / "results/data/.synthetic.damaged/manifest.json").is_file()
