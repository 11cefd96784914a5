"""Config validation: each bad input stops the run with a message naming key, value and
the allowed values — in the library and through the real `snakemake` command."""

import copy
import subprocess
import sys

import pytest
import yaml

from dlbench import config
from dlbench.models import MODELS
from dlbench.optimizations import OPTIMIZATIONS
from tests.conftest import TINY_CONFIG, snakemake, tool_env


def problems(**changes) -> str:
    cfg = copy.deepcopy(TINY_CONFIG)
    for key, value in changes.items():
        if value is None:
            del cfg[key]
        else:
            cfg[key] = value
    with pytest.raises(config.ConfigError) as caught:
        config.validate(cfg)
    return str(caught.value)


def test_valid_config_gets_defaults():
    settings = config.validate(TINY_CONFIG)
    assert settings["scenario"] == "inference"
    assert settings["measurement"]["threads"] == 2
    assert settings["measurement"]["min_iterations"] == 3  # given values win


def test_unknown_key_suggests_the_closest():
    message = problems(modles=["gpt2"])
    assert "unknown config key 'modles'" in message
    assert "did you mean 'models'" in message
    assert "allowed keys:" in message and "sequence_lengths" in message


def test_unknown_nested_key():
    message = problems(measurement={"threds": 2})
    assert "unknown config key 'measurement.threds'" in message
    assert "did you mean 'measurement.threads'" in message


@pytest.mark.parametrize(
    ("key", "bad", "allowed"),
    [
        ("models", "bert-large", list(MODELS)),
        ("frameworks", "jax", ["pytorch", "tensorflow"]),
        ("devices", "tpu", ["cpu", "gpu"]),
        ("optimizations", "tensorrt", list(OPTIMIZATIONS)),
    ],
)
def test_unknown_name_lists_the_allowed_ones(key, bad, allowed):
    message = problems(**{key: [*TINY_CONFIG[key][:1], bad]})
    assert f"config key '{key}[1]': '{bad}' is not allowed" in message
    assert "allowed values: " + ", ".join(allowed) in message


@pytest.mark.parametrize("bad", [0, -4, 1.5, "8", True])
@pytest.mark.parametrize("key", ["batch_sizes", "sequence_lengths"])
def test_sizes_must_be_positive_integers(key, bad):
    message = problems(**{key: [1, bad]})
    assert f"config key '{key}[1]': {bad!r} is not allowed; it must be a positive integer" in (
        message
    )


def test_empty_axis():
    message = problems(models=[])
    assert "config key 'models' is empty" in message and "tiny-bert" in message


def test_missing_axis():
    assert "missing config key 'devices'" in problems(devices=None)


def test_scalar_instead_of_list():
    assert "'tiny-gpt2' must be a list" in problems(models="tiny-gpt2")


def test_every_problem_is_reported_at_once():
    message = problems(models=["nope"], batch_sizes=[0])
    assert "models[0]" in message and "batch_sizes[0]" in message


def test_config_file_errors(tmp_path):
    with pytest.raises(config.ConfigError, match="does not exist"):
        config.load_file(tmp_path / "missing.yaml")
    broken = tmp_path / "broken.yaml"
    broken.write_text("models: [tiny-bert\n")
    with pytest.raises(config.ConfigError, match="is not valid YAML"):
        config.load_file(broken)


def test_snakemake_stops_before_any_job(tmp_path):
    bad = {**TINY_CONFIG, "models": ["tiny-bert", "bert-huge"], "batch_sizes": [0]}
    run = snakemake(tmp_path, bad, "--cores", "1", "--dry-run")
    assert run.returncode != 0
    output = run.stdout + run.stderr
    assert "'bert-huge' is not allowed" in output
    assert "config key 'batch_sizes[0]': 0 is not allowed; it must be a positive integer" in output
    assert not (tmp_path / "results").exists()


def test_cluster_values_cannot_smuggle_shell_syntax():
    message = problems(cluster={"constraint": "gpu; rm -rf ~", "gpu_model": "a100$(id)"})
    assert "config key 'cluster.constraint': 'gpu; rm -rf ~' has characters outside" in message
    assert "config key 'cluster.gpu_model': 'a100$(id)' has characters outside" in message
    ok = config.validate({**TINY_CONFIG, "cluster": {"constraint": "a100&(intel|amd)"}})
    assert ok["cluster"]["exclusive"] is True


def test_unknown_scenario():
    message = problems(scenario="training")
    assert "config key 'scenario': 'training' is not allowed; allowed values: inference" in (
        message)


def test_partial_name_suggests_the_full_one():
    assert "did you mean 'bert-base-uncased'?" in problems(models=["bert"])


@pytest.mark.parametrize("name", ["../../etc/passwd", "gpt2; rm -rf ~", "org/some-model"])
def test_names_that_would_reach_paths_or_shells_are_refused(name):
    # Models come only from the registry: no path, no hub id, no code is ever loaded by name.
    assert f"config key 'models[1]': {name!r} is not allowed" in problems(
        models=["tiny-bert", name])


def test_missing_or_broken_config_file_through_snakemake(tmp_path):
    run = snakemake(tmp_path, None, "--configfile", str(tmp_path / "nope.yaml"), "-n")
    assert run.returncode != 0 and "nope.yaml" in run.stdout + run.stderr
    broken = tmp_path / "broken.yaml"
    broken.write_text("models: [tiny-bert\n")
    run = snakemake(tmp_path, None, "--configfile", str(broken), "-n")
    assert run.returncode != 0
    assert "Config file is not valid JSON or YAML" in run.stdout + run.stderr
    assert not (tmp_path / "results").exists()


def test_check_command_validates_a_preset(tmp_path):
    good, bad = tmp_path / "good.yaml", tmp_path / "bad.yaml"
    good.write_text(yaml.safe_dump(TINY_CONFIG))
    bad.write_text(yaml.safe_dump({**TINY_CONFIG, "batch_sizes": [-1]}))
    dlbench = [sys.executable, "-m", "dlbench", "check"]
    done = subprocess.run([*dlbench, str(good)], capture_output=True, text=True, env=tool_env())
    assert done.returncode == 0
    assert "valid, 64 cells, 24 to measure" in done.stdout
    assert "16 unsupported: optimization 'graph' does not exist in PyTorch" in done.stdout
    assert "12 unsupported: sequence length 128 exceeds tiny-bert's maximum" in done.stdout
    done = subprocess.run([*dlbench, str(bad)], capture_output=True, text=True, env=tool_env())
    assert done.returncode == 1
    assert "'batch_sizes[0]': -1 is not allowed; it must be a positive integer" in done.stderr
