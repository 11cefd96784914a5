"""Config validation of the training sections: every key of `training:`, `train_step:` and
`data:` with each kind of bad value (out of range, an unknown name, the wrong type, a scalar
for a list, a missing folder) stops the run with one message that names the key and says
what is wanted. (Inference's keys: tests/test_config.py.)"""

import copy
import subprocess
import sys

import pytest
import yaml

from dlbench.plan import config
from tests.conftest import tool_env

VALID = {
    "frameworks": ["pytorch", "tensorflow"],
    "devices": ["cpu"],
    "training": {"models": ["cnn"], "datasets": ["synthetic"], "batch_sizes": [8],
                 "pipelines": ["w0"], "optimizers": ["sgd"], "optimizations": ["eager"],
                 "epochs": 1},
    "train_step": {"models": ["tiny-bert"], "batch_sizes": [1], "sequence_lengths": [8],
                   "optimizers": ["sgd"], "optimizations": ["eager"]},
}

MISSING = "(left out)"  # a key the section lacks
POSITIVE_INTEGER = "it must be a positive integer"
POSITIVE_NUMBER = "it must be a positive number"
BOOLEAN = "it must be true or false"
PIPELINE = "it must be 'memory' or w<workers>[-p<prefetch>][-cache][-pin]"

# (section, key, bad value, what the message must say besides the key). The key is the
# config key as the message names it; a value of None for `key`'s last part sets the section.
CASES = [
    # -- training: axes
    ("training", "models", ["cnnn"], "'cnnn' is not allowed (did you mean 'cnn'?); allowed "
     "values: cnn"),
    ("training", "models", [1], "1 is not allowed; allowed values: cnn"),
    ("training", "models", "cnn", "'cnn' must be a list, for example ['cnn']"),
    ("training", "models", [], "is empty: give at least one value; allowed values: cnn"),
    ("training", "datasets", ["cifar"], "(did you mean 'cifar10'?); allowed values: "
     "synthetic, digits, cifar10"),
    ("training", "datasets", "digits", "must be a list, for example ['digits']"),
    ("training", "batch_sizes", [0], POSITIVE_INTEGER),
    ("training", "batch_sizes", ["8"], POSITIVE_INTEGER),
    ("training", "batch_sizes", [1.5], POSITIVE_INTEGER),
    ("training", "batch_sizes", 8, "8 must be a list, for example [8]"),
    ("training", "batch_sizes", [4000], "batch 4000 on 'synthetic' (2000 training images) "
     "for 1 epoch(s) makes 0 steps, fewer than the 2 a cell needs"),
    ("training", "pipelines", ["W0"], f"'W0' is not allowed (did you mean 'w0'?); {PIPELINE}"),
    ("training", "pipelines", ["mem"], "(did you mean 'memory'?)"),
    ("training", "pipelines", ["w-1"], PIPELINE),
    ("training", "pipelines", [2], PIPELINE),
    ("training", "pipelines", ["w2-p0"], "-p0 prepares nothing ahead: give a prefetch "
     "depth of 1 or more"),
    ("training", "pipelines", ["w20000"], "20000 loaders (more than 256)"),
    ("training", "pipelines", "w0", "must be a list, for example ['w0']"),
    ("training", "optimizers", ["sdg"], "(did you mean 'sgd'?); allowed values: sgd, adam"),
    ("training", "optimizers", "adam", "must be a list, for example ['adam']"),
    ("training", "optimizations", ["eagr"], "(did you mean 'eager'?); allowed values: eager"),
    ("training", "optimizations", "eager", "must be a list, for example ['eager']"),
    ("training", "optimizations", {"pytorch": "eager", "tensorflow": ["graph"]},
     "'eager' must be a list, for example ['eager']"),
    # -- training: settings
    ("training", "epochs", 0, POSITIVE_INTEGER),
    ("training", "epochs", "3", POSITIVE_INTEGER),
    ("training", "epochs", 2.5, POSITIVE_INTEGER),
    ("training", "epochs", [3], POSITIVE_INTEGER),
    ("training", "learning_rate", 0.1, "must be a mapping of keys to values, for example "
     "{sgd: 0.01}"),
    ("training", "learning_rate.sgd", 0, POSITIVE_NUMBER),
    ("training", "learning_rate.sgd", "0.1", POSITIVE_NUMBER),
    ("training", "learning_rate.adam", float("nan"), "nan is not allowed; it must be a "
     "finite number"),
    ("training", "learning_rate.sdg", 0.1, "(did you mean 'training.learning_rate.sgd'?)"),
    ("training", "target_accuracy", 70, "it must be a number > 0 and ≤ 1 (a fraction: 0.7 "
     "for 70%)"),
    ("training", "target_accuracy", 0, "it must be a number > 0 and ≤ 1"),
    ("training", "target_accuracy", "0.7", "it must be a number > 0 and ≤ 1"),
    ("training", "accuracy_tolerance", -0.01, "it must be a number ≥ 0 and ≤ 1"),
    ("training", "accuracy_tolerance", 2, "(a fraction: 0.02 for 2%)"),
    ("training", "seeds", 0, POSITIVE_INTEGER),
    ("training", "seeds", "2", POSITIVE_INTEGER),
    ("training", "breakdown", "yes", BOOLEAN),
    ("training", "ablation", 1, BOOLEAN),
    ("training", "cold_cache", "false", BOOLEAN),
    ("training", "profile", None, BOOLEAN),
    ("training", "epoch", 3, "(did you mean 'training.epochs'?); allowed keys: "),
    ("training", "", "cnn", "must be a mapping of keys to values"),
    ("training", "datasets", MISSING, "allowed values: synthetic, digits, cifar10"),
    # -- train_step
    ("train_step", "models", ["tiny-bret"], "(did you mean 'tiny-bert'?); allowed values: "),
    ("train_step", "models", "tiny-bert", "must be a list, for example ['tiny-bert']"),
    ("train_step", "batch_sizes", [0], POSITIVE_INTEGER),
    ("train_step", "batch_sizes", "1", "must be a list, for example [1]"),
    ("train_step", "sequence_lengths", [-8], POSITIVE_INTEGER),
    ("train_step", "sequence_lengths", 8, "must be a list, for example [8]"),
    ("train_step", "optimizers", ["adamw"], "(did you mean 'adam'?); allowed values: sgd, "
     "adam"),
    ("train_step", "optimizations", ["fusd"], "(did you mean 'fused'?)"),
    ("train_step", "learning_rate.adam", -1e-3, POSITIVE_NUMBER),
    ("train_step", "learning_rate.adam", "1e-3", POSITIVE_NUMBER),
    ("train_step", "learning_rate.adam", float("inf"), "it must be a finite number"),
    ("train_step", "learning_rate", 0.001, "for example {sgd: 0.01}"),
    ("train_step", "sequence_length", [8], "(did you mean 'train_step.sequence_lengths'?)"),
    # -- data
    ("data", "synthetic_train", 5, "it must be an integer ≥ 10"),
    ("data", "synthetic_train", "100", "it must be an integer ≥ 10"),
    ("data", "synthetic_test", 1.5, "it must be an integer ≥ 10"),
    ("data", "seed", -1, "it must be an integer ≥ 0"),
    ("data", "seed", "0", "it must be an integer ≥ 0"),
    ("data", "cifar10_dir", 5, "it must be a string"),
    ("data", "cifar10_dir", ["/data/cifar"], "it must be a string"),
    ("data", "synthetic_trian", 10, "(did you mean 'data.synthetic_train'?)"),
    ("data", "", "digits", "must be a mapping of keys to values, for example "
     "{synthetic_train: 2000}"),
]


def bad_config(section: str, key: str, value) -> dict:
    cfg = copy.deepcopy(VALID)
    if not key:
        cfg[section] = value
        return cfg
    if value is MISSING:
        del cfg[section][key]
        return cfg
    where = cfg.setdefault(section, {})
    *parents, last = key.split(".")
    for parent in parents:
        where = where.setdefault(parent, {})
    where[last] = value
    return cfg


@pytest.mark.parametrize(("section", "key", "value", "wanted"), CASES,
                         ids=[f"{s}.{k}={v!r}" for s, k, v, _ in CASES])
def test_a_bad_value_gets_one_message_naming_the_key(section, key, value, wanted):
    with pytest.raises(config.ConfigError) as caught:
        config.validate(bad_config(section, key, value))
    lines = str(caught.value).splitlines()[1:]
    assert len(lines) == 1, lines  # one message, not one per check of the schema
    name = f"{section}.{key}" if key else section
    assert f"'{name}" in lines[0] and wanted in lines[0], lines[0]
    assert "Failed validating" not in lines[0]  # no jsonschema dump


def test_the_valid_base_is_valid():
    settings = config.validate(VALID)
    assert settings["training"]["target_accuracy"] == 0.7


def test_a_missing_cifar10_folder_is_named(tmp_path):
    cfg = bad_config("training", "datasets", ["cifar10"])
    for folder, wanted in (("", "data.cifar10_dir is not set"),
                           (str(tmp_path / "nope"), f"data.cifar10_dir: "
                                                    f"'{tmp_path / 'nope'}' is not a folder"),
                           (str(tmp_path), f"data.cifar10_dir: {tmp_path} lacks data_batch_1")):
        with pytest.raises(config.ConfigError, match="cifar10") as caught:
            config.validate({**cfg, "data": {"cifar10_dir": folder}})
        assert wanted in str(caught.value)
    # A folder the config names with ~ is the user's home folder, as in a shell.
    with pytest.raises(config.ConfigError) as caught:
        config.validate({**cfg, "data": {"cifar10_dir": "~/no-such-cifar-folder"}})
    assert "/no-such-cifar-folder" in str(caught.value) and "'~" not in str(caught.value)


def test_every_problem_at_once():
    cfg = bad_config("training", "epochs", 0)
    cfg["training"]["pipelines"] = ["W0"]
    cfg["data"] = {"seed": -1}
    with pytest.raises(config.ConfigError) as caught:
        config.validate(cfg)
    lines = str(caught.value).splitlines()[1:]
    assert len(lines) == 3
    for key in ("training.epochs", "training.pipelines[0]", "data.seed"):
        assert sum(f"'{key}'" in line for line in lines) == 1, key


def test_check_command_stops_on_a_bad_training_key(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump(bad_config("training", "target_accuracy", 70)))
    done = subprocess.run([sys.executable, "-m", "dlbench", "check", str(bad)],
                          capture_output=True, text=True, env=tool_env())
    assert done.returncode == 1
    assert "config key 'training.target_accuracy': 70 is not allowed" in done.stderr
    assert "Traceback" not in done.stderr
