"""Config validation: each bad input stops the run with a message naming key, value and
the allowed values — in the library and through the real `snakemake` command. The
scenario's keys live in its section (inference:); the v1 layout, with them at the top
level, is still read."""

import copy
import re
import subprocess
import sys

import pytest
import yaml

from dlbench.catalogue.axes import FRAMEWORKS
from dlbench.catalogue.models import MODELS
from dlbench.catalogue.recipes import optimizations
from dlbench.plan import config
from tests.conftest import TINY_CONFIG, snakemake, tiny_config, tool_env


def problems(flat: bool = False, **changes) -> str:
    """The message of TINY_CONFIG with changes (keys of the inference section go there, or
    with flat=True the whole config in the v1 layout); None deletes a key."""
    cfg = copy.deepcopy(TINY_CONFIG)
    if flat:
        cfg.update(cfg.pop("inference"))
    for key, value in changes.items():
        where = cfg["inference"] if not flat and key in cfg["inference"] else cfg
        if value is None:
            del where[key]
        else:
            where[key] = value
    with pytest.raises(config.ConfigError) as caught:
        config.validate(cfg)
    return str(caught.value)


def test_valid_config_gets_defaults():
    settings = config.validate(TINY_CONFIG)
    assert settings["scenarios"] == ["inference"]
    assert settings["measurement"]["threads"] == 2
    assert settings["measurement"]["min_iterations"] == 3  # given values win


def test_the_v1_layout_is_read_as_the_inference_section():
    flat = {key: value for key, value in TINY_CONFIG.items() if key != "inference"}
    flat.update(TINY_CONFIG["inference"], scenario="inference")
    assert config.validate(flat) == config.validate(TINY_CONFIG)
    # Top-level keys narrow the section, as `--config batch_sizes=[1]` does.
    narrowed = config.validate({**TINY_CONFIG, "batch_sizes": [1]})
    assert narrowed["inference"]["batch_sizes"] == [1]
    assert narrowed["inference"]["models"] == TINY_CONFIG["inference"]["models"]


def test_the_v1_layout_names_keys_as_written():
    message = problems(flat=True, models=["tiny-bert", "bert-huge"], batch_sizes=[0])
    assert "config key 'models[1]': 'bert-huge' is not allowed" in message
    assert "config key 'batch_sizes[0]': 0 is not allowed" in message
    assert "missing config key 'sequence_lengths'" in problems(flat=True, sequence_lengths=None)


def test_a_config_without_a_scenario_section():
    message = problems(inference=None)
    assert "the config has no scenario section" in message and "inference" in message
    message = problems(scenarios=["inference", "nope"])
    assert "config key 'scenarios[1]': 'nope' is not allowed" in message


def test_unknown_key_suggests_the_closest():
    message = problems(modles=["gpt2"])
    assert "unknown config key 'modles'" in message
    assert "did you mean 'models'" in message
    assert "allowed keys:" in message and "sequence_lengths" in message
    message = problems(inference={**TINY_CONFIG["inference"], "batch_size": [1]})
    assert "unknown config key 'inference.batch_size'" in message
    assert "did you mean 'inference.batch_sizes'" in message


def test_unknown_nested_key():
    message = problems(measurement={"threds": 2})
    assert "unknown config key 'measurement.threds'" in message
    assert "did you mean 'measurement.threads'" in message


@pytest.mark.parametrize(
    ("key", "bad", "allowed"),
    [
        ("models", "bert-large", list(MODELS)),
        ("frameworks", "caffe", list(FRAMEWORKS)),
        ("devices", "tpu", ["cpu", "gpu"]),
        ("optimizations", "tensorrt", list(optimizations("inference"))),
    ],
)
def test_unknown_name_lists_the_allowed_ones(key, bad, allowed):
    section = TINY_CONFIG["inference"]
    where = f"inference.{key}" if key in section else key
    message = problems(**{key: [*(section.get(key) or TINY_CONFIG[key])[:1], bad]})
    assert f"config key '{where}[1]': '{bad}' is not allowed" in message
    assert "allowed values: " + ", ".join(allowed) in message


@pytest.mark.parametrize("bad", [0, -4, 1.5, "8", True])
@pytest.mark.parametrize("key", ["batch_sizes", "sequence_lengths"])
def test_sizes_must_be_positive_integers(key, bad):
    message = problems(**{key: [1, bad]})
    assert (f"config key 'inference.{key}[1]': {bad!r} is not allowed; it must be a positive "
            "integer") in message


def test_empty_axis():
    message = problems(models=[])
    assert "config key 'inference.models' is empty" in message and "tiny-bert" in message


def test_missing_axis():
    assert "missing config key 'devices'" in problems(devices=None)


def test_scalar_instead_of_list():
    assert "'tiny-gpt2' must be a list" in problems(models="tiny-gpt2")


def test_every_problem_is_reported_at_once():
    message = problems(models=["nope"], batch_sizes=[0], devices=["tpu"])
    assert "inference.models[0]" in message and "inference.batch_sizes[0]" in message
    assert "devices[0]" in message


def test_config_file_errors(tmp_path):
    with pytest.raises(config.ConfigError, match="does not exist"):
        config.load_file(tmp_path / "missing.yaml")
    broken = tmp_path / "broken.yaml"
    broken.write_text("models: [tiny-bert\n")
    with pytest.raises(config.ConfigError, match="is not valid YAML"):
        config.load_file(broken)


def test_snakemake_stops_before_any_job(tmp_path):
    bad = tiny_config(models=["tiny-bert", "bert-huge"], batch_sizes=[0])
    # A training section's bad values too (tests/test_config_training.py checks each key).
    bad["training"] = {"models": ["cnn"], "datasets": ["digits"], "batch_sizes": [64],
                       "pipelines": ["W2"], "optimizers": ["sgd"], "optimizations": ["eager"],
                       "target_accuracy": 70}
    run = snakemake(tmp_path, bad, "--cores", "1", "--dry-run")
    assert run.returncode != 0
    output = run.stdout + run.stderr
    assert "'bert-huge' is not allowed" in output
    assert ("config key 'inference.batch_sizes[0]': 0 is not allowed; it must be a positive "
            "integer") in output
    assert "config key 'training.pipelines[0]': 'W2' is not allowed (did you mean 'w2'?)" in (
        output)
    assert "config key 'training.target_accuracy': 70 is not allowed" in output
    assert "Traceback" not in output
    assert not (tmp_path / "results").exists()


def test_cluster_values_cannot_smuggle_shell_syntax():
    message = problems(cluster={"constraint": "gpu; rm -rf ~", "gpu_model": "a100$(id)"})
    assert "config key 'cluster.constraint': 'gpu; rm -rf ~' has characters outside" in message
    assert "config key 'cluster.gpu_model': 'a100$(id)' has characters outside" in message
    ok = config.validate({**TINY_CONFIG, "cluster": {"constraint": "a100&(intel|amd)"}})
    assert ok["cluster"]["exclusive"] is True


def test_unknown_scenario():
    message = problems(flat=True, scenario="nope")
    assert "config key 'scenario': 'nope' is not allowed; allowed values: inference" in message


def test_partial_name_suggests_the_full_one():
    assert "did you mean 'bert-base-uncased'?" in problems(models=["bert"])


@pytest.mark.parametrize("name", ["../../etc/passwd", "gpt2; rm -rf ~", "org/some-model"])
def test_names_that_would_reach_paths_or_shells_are_refused(name):
    # Models come only from the registry: no path, no hub id, no code is ever loaded by name.
    assert f"config key 'inference.models[1]': {name!r} is not allowed" in problems(
        models=["tiny-bert", name])


@pytest.mark.slow  # two `snakemake` runs; load_file's errors are checked quickly above
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
    good.write_text(yaml.safe_dump(tiny_config(frameworks=["pytorch", "tensorflow"])))
    bad.write_text(yaml.safe_dump(tiny_config(batch_sizes=[-1])))
    dlbench = [sys.executable, "-m", "dlbench", "check"]
    done = subprocess.run([*dlbench, str(good)], capture_output=True, text=True, env=tool_env())
    assert done.returncode == 0
    assert "valid, 64 cells, 24 to measure" in done.stdout
    assert "16 unsupported: optimization 'graph' does not exist in PyTorch" in done.stdout
    assert "12 unsupported: sequence length 128 exceeds tiny-bert's maximum" in done.stdout
    done = subprocess.run([*dlbench, str(bad)], capture_output=True, text=True, env=tool_env())
    assert done.returncode == 1
    assert "'inference.batch_sizes[0]': -1 is not allowed; it must be a positive integer" in (
        done.stderr)


@pytest.mark.parametrize("optimizations, message", [
    ({"pytorch": ["eager"]}, "inference: optimizations: no list for tensorflow"),
    ({"pytorch": ["eager"], "tensorflow": ["grph"]},
     "'inference.optimizations.tensorflow[0]': 'grph' is not allowed (did you mean 'graph'?)"),
    ({"pytorch": ["eager"], "tensorflow": ["eager"], "mxnet": ["eager"]},
     "unknown config key 'inference.optimizations.mxnet'"),
])
def test_optimizations_per_framework_are_checked(optimizations, message):
    with pytest.raises(config.ConfigError, match=re.escape(message)):
        config.validate(tiny_config(optimizations=optimizations))


def test_optimizations_per_framework_name_frameworks_of_the_matrix():
    with pytest.raises(config.ConfigError, match="tensorflow is not in frameworks"):
        config.validate(tiny_config(frameworks=["pytorch"], optimizations={
            "pytorch": ["eager"], "tensorflow": ["graph"]}))


def test_adaptive_stopping_needs_room_above_the_minimum():
    with pytest.raises(config.ConfigError, match=re.escape(
            "max_duration_s (3) is shorter than min_duration_s (5.0)")):
        config.validate(tiny_config({"min_duration_s": 5.0, "max_duration_s": 3,
                                     "target_ci": 0.02}))
    fixed = config.validate(tiny_config({"min_duration_s": 5.0, "max_duration_s": 3,
                                         "target_ci": 0}))
    assert fixed["measurement"]["min_duration_s"] == 5.0  # without adaptive stopping: no limit
