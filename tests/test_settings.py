"""Measurement settings are defined once (the config schema): the workflow's command line
and `dlbench run`'s options derive from it, and a config survives the round trip."""

import pytest

from dlbench import cli
from dlbench.plan import config, settings
from tests.conftest import TINY_CONFIG, tiny_config


def parse(measurement_args: list[str]):
    return cli.parse_args(["run", "--framework=pytorch", "--model=tiny-bert", "--device=cpu",
                           "--batch=1", "--seqlen=8", "--optimization=eager", "--out=x.json",
                           *measurement_args])


@pytest.mark.parametrize("measurement", [
    {},  # every default
    {"warmup_iterations": 0, "min_duration_s": 0.25, "min_iterations": 7, "threads": 3,
     "interop_threads": 2, "seed": 5, "sample_hz": 0, "repeats": 3, "timeout_s": 60.5,
     "max_host_memory_gib": 1.5, "process": "per_group"},
])
def test_config_to_command_line_to_settings(measurement):
    validated = config.validate(tiny_config(measurement=measurement))["measurement"]
    args = settings.to_args(validated)
    # How jobs are cut and ordered, and how the peaks wait: no options of a cell.
    assert not any(arg.startswith(("--process", "--rounds", "--quiet")) for arg in args)
    parsed = settings.from_args(parse(args))
    assert parsed == {k: v for k, v in validated.items() if k not in settings.NOT_PER_CELL}


def test_the_defaults_are_the_schemas():
    """`dlbench run`'s defaults are the schema's, except for settings added after v1,
    whose default there is the value that measures as v1 did (the workflow passes its
    config's value whenever it differs)."""
    schema = config.schema()["properties"]["measurement"]["properties"]
    assert settings.from_args(parse([])) == {
        name: spec.get("x-v1", spec["default"]) for name, spec in schema.items()
        if name not in settings.NOT_PER_CELL}
    assert config.validate({**TINY_CONFIG, "measurement": {}})["measurement"]["repeats"] == 1


def test_options_are_checked_against_the_schema(capsys):
    with pytest.raises(SystemExit):
        parse(["--min-iterations=0"])
    assert "--min-iterations: 0: 0 is less than the minimum of 1" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        parse(["--timeout-s=soon"])
    assert "'soon' is not number" in capsys.readouterr().err
