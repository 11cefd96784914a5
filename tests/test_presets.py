"""The hf2019 preset: it is the 2019 transformers matrix (with JAX beside it), and a slice of
it runs through the real `snakemake` (the preset's frameworks, devices and optimizations, as
documented in the README; `--config` narrows it to one tiny model, one batch size and one
length, with quick timing), GPU cells recorded as unsupported on this CPU-only machine"""

import re
import shutil

import pandas as pd
import pytest
import yaml

from dlbench.plan import config
from dlbench.plan.matrix import expand_cells
from dlbench.records import result
from tests.conftest import REPO, snakemake, start_from

PRESET = REPO / "config" / "presets" / "hf2019.yaml"
PROFILE = ["--workflow-profile", str(REPO / "workflow" / "profiles" / "default")]
SLICE = ["models=[tiny-xlm]", "batch_sizes=[1]", "sequence_lengths=[8]",
         "measurement={warmup_iterations: 1, min_duration_s: 0.05, min_iterations: 3,"
         " target_ci: 0}"]
MODELS_2019 = ["bert-base-uncased", "distilbert-base-uncased", "gpt2", "distilgpt2",
               "roberta-base", "xlnet-base-cased", "xlm-mlm-en-2048"]


def test_the_preset_is_the_2019_matrix():
    preset = config.load_file(PRESET)
    inference = preset["inference"]
    assert inference["models"] == MODELS_2019
    assert inference["batch_sizes"] == [1, 2, 4, 8]
    assert inference["sequence_lengths"] == [8, 64, 128, 256, 512, 1024]
    assert preset["frameworks"] == ["pytorch", "tensorflow", "jax"]
    assert preset["devices"] == ["cpu", "gpu"]
    assert inference["optimizations"] == ["eager", "torchscript", "graph", "xla", "jit"]
    cells = expand_cells(preset)
    assert len(cells) == 7 * 4 * 6 * 5 * 3 * 2
    runnable = [c for c in cells if c.unsupported_reason() is None]
    # PyTorch eager + TorchScript and TensorFlow eager, graph, XLA over the 2019 models, 1024
    # only for the GPT-2s and XLNet; JAX eager + jit over the five with a Flax class (not
    # XLNet, XLM), 1024 for the GPT-2s.
    assert len(runnable) == 5 * 4 * 2 * (7 * 5 + 3) + 2 * 4 * 2 * (5 * 5 + 2)
    assert {c.model for c in runnable if c.framework == "jax"} == set(MODELS_2019) - {
        "xlnet-base-cased", "xlm-mlm-en-2048"}


# Snakemake's merging is one mechanism: the quick subset checks it for the default and one
# preset, the full suite for every preset.
@pytest.mark.parametrize("preset", [None, PRESET, *(
    pytest.param(p, marks=pytest.mark.slow) for p in sorted(PRESET.parent.glob("*.yaml"))
    if p != PRESET)], ids=lambda p: p.name if p else "default")
def test_a_config_file_given_replaces_the_default(tmp_path, preset):
    """Where a user runs it (beside config/config.yaml), `--configfile preset` plans the
    preset's cells and none of the default's: Snakemake would merge the two otherwise."""
    (tmp_path / "config").mkdir()
    shutil.copy(REPO / "config" / "config.yaml", tmp_path / "config")
    raw = yaml.safe_load((preset or REPO / "config" / "config.yaml").read_text())
    given = ["--configfile", str(preset)] if preset else []
    if "cifar10" in raw.get("training", {}).get("datasets", []):
        from tests.test_training import fake_cifar10

        raw["data"]["cifar10_dir"] = str(fake_cifar10(tmp_path / "cifar"))
        given += ["--config", f"data={{cifar10_dir: {raw['data']['cifar10_dir']}}}"]
    dry = snakemake(tmp_path, None, *given, "--cores", "2", "--dry-run")
    assert dry.returncode == 0, dry.stderr[-3000:]
    planned = set(re.findall(r"results/runs/([^\s,]+)\.json", dry.stdout + dry.stderr))
    assert planned == {cell.id for cell in expand_cells(config.validate(raw))}


@pytest.fixture(scope="module")
def slice_run(tmp_path_factory, measured_once):
    workdir = start_from(measured_once, tmp_path_factory.mktemp("hf2019-slice"), kept=["peak"])
    run = snakemake(workdir, None, "--configfile", str(PRESET), *PROFILE, "--cores", "2",
                    "--config", *SLICE)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    return workdir


@pytest.mark.slow
def test_the_slice_runs_every_cell_that_applies(slice_run):
    sliced = config.load_file(PRESET)
    sliced["inference"].update(models=["tiny-xlm"], batch_sizes=[1],
                               sequence_lengths=[8])
    cells = expand_cells(sliced)
    runs = slice_run / "results" / "runs"
    assert sorted(p.stem for p in runs.glob("*.json")) == sorted(c.id for c in cells)
    for cell in cells:
        record = result.read(runs / f"{cell.id}.json")
        if cell.unsupported_reason():
            assert (record["status"], record["reason"]) == ("unsupported",
                                                            cell.unsupported_reason())
        elif cell.device == "gpu":
            assert record["status"] == "unsupported" and "GPU" in record["reason"]
        else:
            assert record["status"] == "ok", (cell.id, record["reason"])
            assert record["settings"]["min_iterations"] == 3  # the --config override
            assert record["correctness"]["within_tolerance"] is True, record["correctness"]
    # The shared inputs: weights per model and one reference per (model, batch, length).
    reference = slice_run / "results" / "reference"
    assert sorted(p.relative_to(reference).as_posix() for p in reference.rglob("*.*")
                  if p.suffix in (".safetensors", ".npz")) == [
        "tiny-xlm/b1_s8.npz", "tiny-xlm/model.safetensors"]


@pytest.mark.slow
def test_summary_and_report_show_speed_compile_time_and_correctness(slice_run):
    summary = pd.read_parquet(slice_run / "results" / "summary.parquet")
    ok = summary[summary["status"] == "ok"]
    assert set(ok["optimization"]) == {"eager", "torchscript", "graph", "xla"}
    assert ok["correctness_max_rel_error"].lt(1e-4).all()
    assert ok["compile_s"].ge(0).all()
    reasons = summary.set_index("cell_id")["reason"]
    assert reasons["pytorch_tiny-xlm_cpu_b1_s8_xla"] == (
        "optimization 'xla' does not exist in PyTorch (only in TensorFlow)")
    html = (slice_run / "report" / "report.html").read_text()
    for text in ("Speed-up over eager", "Compile, trace and conversion time", "Correctness",
                 "All 5 checked outputs are within their tolerance",
                 "Not applicable by design, and not counted as failures"):
        assert text in html


@pytest.mark.parametrize("preset", sorted((REPO / "config" / "presets").glob("*.yaml")),
                         ids=lambda p: p.name)
def test_every_preset_is_a_valid_config(preset, tmp_path):
    raw = yaml.safe_load(preset.read_text())
    if "cifar10" in raw.get("training", {}).get("datasets", []):
        with pytest.raises(config.ConfigError, match="data.cifar10_dir is not set"):
            config.load_file(preset)  # the user gives the folder, as the preset says
        from tests.test_training import fake_cifar10

        raw["data"]["cifar10_dir"] = str(fake_cifar10(tmp_path / "cifar"))
        assert expand_cells(config.validate(raw))
        return
    assert expand_cells(config.load_file(preset))
