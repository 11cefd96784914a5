"""One codec carries every setting from the config to the cell's process: for every
registered scenario, each of its settings and the measurement settings, at their defaults
and at values that differ from them, survive config → `dlbench run` options → parsed
settings; a setting dropped on the way is caught; the command lines of finished cells stay
those they were measured with."""

import copy

import jsonschema
import pytest

from dlbench import cli, scenarios
from dlbench.plan import config, settings
from dlbench.plan.jobs import job_args
from dlbench.plan.matrix import expand_cells
from dlbench.scenarios import codec
from dlbench.scenarios.train_step import TrainStep
from tests.conftest import TINY_CONFIG

# A section of every built-in scenario, on the tiny models (one cell per axis value).
SECTIONS = {
    "inference": {"models": ["tiny-bert"], "batch_sizes": [1, 2], "sequence_lengths": [8],
                  "optimizations": ["eager"]},
    "training": {"models": ["cnn"], "datasets": ["synthetic"], "batch_sizes": [8],
                 "pipelines": ["w0"], "optimizers": ["sgd", "adam"],
                 "optimizations": ["eager"]},
    "train_step": {"models": ["tiny-bert"], "batch_sizes": [2], "sequence_lengths": [16],
                   "optimizers": ["sgd", "adam"], "optimizations": ["eager"]},
    "generation": {"models": ["tiny-gpt2"], "batch_sizes": [1, 2], "prompt_lengths": [8],
                   "new_tokens": [4], "optimizations": ["eager"]},
}


def changed(spec: dict):
    """A valid value of a setting's schema other than its default (and its v1 value, so
    that it reaches the command line)."""
    if "x-per-axis" in spec:
        return {key: changed(item) for key, item in spec["properties"].items()}
    default = spec.get("default")
    if spec["type"] == "boolean":
        return not default
    if "enum" in spec:  # the v1 value only where it is the only other (`attention`)
        others = [v for v in spec["enum"] if v != default]
        return next((v for v in others if v != spec.get("x-v1")), others[0])
    kind = int if spec["type"] == "integer" else float
    for candidate in (default * 2 + 1, default + 1, default / 2, default + 0.5):
        value = kind(candidate)
        if value not in (default, spec.get("x-v1")) and jsonschema.Draft202012Validator(
                spec).is_valid(value):
            return value
    raise AssertionError(f"no other valid value for {spec}")


def matrix(scenario: scenarios.Scenario, change: bool) -> dict:
    """A validated config of the scenario's section: its settings and the measurement's at
    their defaults, or each changed."""
    section = copy.deepcopy(SECTIONS.get(scenario.name, {}))
    measurement = {"process": "per_group"}
    if change:
        section |= {n: changed(s) for n, s in scenario.settings_schema().items()}
        measurement |= {n: changed(s) for n, s in settings.codec().properties.items()}
    return config.validate({"frameworks": ["pytorch"], "devices": ["cpu"],
                            scenario.name: section, "measurement": measurement})


def expected(scenario: scenarios.Scenario, validated: dict, cell) -> dict:
    """What the cell's process should read: the config's values, a per-axis setting's for
    the cell's own axis value."""
    section = validated[scenario.name]
    values = {n: v for n, v in validated["measurement"].items()
              if n not in settings.NOT_PER_CELL}
    for name, spec in scenario.settings_schema().items():
        axis = spec.get("x-per-axis")
        values[name] = section[name][cell.size(axis)] if axis else section[name]
    return values


def round_trip_problems(validated: dict) -> list[str]:
    """Every cell's (and group's) job: its options as the workflow writes them, parsed by
    `dlbench run`; what differs from the config, setting by setting."""
    problems = []
    cells = expand_cells(validated)
    groups: dict[str, list] = {}
    for cell in cells:
        groups.setdefault(cell.group_id, []).append(cell)
    jobs = [([cell], False) for cell in cells] + [
        (group, True) for group in groups.values() if group[0].spec.groupable]
    for job, grouped in jobs:
        args = job_args(job, grouped, validated)
        parsed = cli.parse_args(["run", *args, "--out-dir" if grouped else "--out", "x"])
        if cli.run_cells(parsed) != job:
            problems.append(f"{job[0].id}: the sizes read back are not the job's cells")
        scenario = job[0].spec
        got = {**settings.from_args(parsed), **scenario.settings_from_args(parsed, job[0])}
        for name, value in expected(scenario, validated, job[0]).items():
            # A number may come back as a float (30 for 30.0), a switch must stay one.
            if got.get(name) != value or isinstance(got.get(name), bool) != isinstance(
                    value, bool):
                problems.append(f"{job[0].id}: {name} is {got.get(name)!r}, not {value!r}")
    return problems


@pytest.mark.parametrize("change", [False, True], ids=["defaults", "changed"])
@pytest.mark.parametrize("name", sorted(scenarios.scenarios()))
def test_every_setting_survives_config_to_command_line_to_settings(name, change):
    scenario = scenarios.get(name)
    if name not in SECTIONS:
        assert name not in scenarios.BUILT_IN, f"a built-in scenario without a section: {name}"
        pytest.skip(f"no section of {name} here (a plugin's)")
    assert round_trip_problems(matrix(scenario, change)) == []


class Planted(TrainStep):
    """train_step with one more setting: the check must see it go missing."""

    name = "planted"
    recipes_of = "train_step"

    def settings_schema(self) -> dict:
        return {**super().settings_schema(),
                "planted": {"description": "a planted setting", "type": "integer",
                            "minimum": 1, "default": 1}}


class Forgotten(Planted):
    """Settings written by hand again (the old way): the planted one forgotten."""

    def setting_args(self, section, cell):
        return [arg for arg in super().setting_args(section, cell)
                if not arg.startswith("--planted")]


@pytest.mark.parametrize("where", ["written", "read"])
def test_a_setting_dropped_on_the_way_is_caught(monkeypatch, where):
    plant = Forgotten() if where == "written" else Planted()
    monkeypatch.setitem(scenarios._REGISTRY, plant.name, plant)
    if where == "read":  # a codec that drops it when reading the options back
        reads = codec.Codec.from_args
        monkeypatch.setattr(codec.Codec, "from_args", lambda self, args, cell=None: {
            k: v for k, v in reads(self, args, cell).items() if k != "planted"})
    section = {**SECTIONS["train_step"], "learning_rate": {"sgd": 0.05, "adam": 0.002},
               "planted": 7}
    validated = {"frameworks": ["pytorch"], "devices": ["cpu"], "scenarios": [plant.name],
                 plant.name: section, "measurement": {**settings.defaults(),
                                                      "process": "per_cell"}}
    problems = round_trip_problems(validated)
    # Left off the command line, the cell runs with the default; not read back, without it.
    read_back = "1" if where == "written" else "None"
    assert problems == [f"{cell.id}: planted is {read_back}, not 7"
                        for cell in expand_cells(validated)]


def test_a_value_is_checked_against_its_schema(capsys):
    with pytest.raises(SystemExit):
        cli.parse_args(["run", "--scenario=training", "--framework=pytorch", "--model=cnn",
                        "--device=cpu", "--optimization=eager", "--batch=0", "--out=x"])
    assert "--batch: 0: 0 is less than the minimum of 1" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        cli.parse_args(["run", "--scenario=training", "--framework=pytorch", "--model=cnn",
                        "--device=cpu", "--optimization=eager", "--batch=8",
                        "--target-accuracy=1.5", "--out=x"])
    assert "1.5 is greater than the maximum of 1" in capsys.readouterr().err


# The command lines that these cells were measured with (the workflow's dry run before
# the codec): Snakemake compares them with its records, so they must not change — but on
# purpose: the training cell's `--decay-epochs=1` (2026-11-30) is another training, whose
# cells are measured again, and so is a training cell of a new protocol (4: the memory
# pipelines' compiled batch).
MEASUREMENT = {"warmup_iterations": 1, "min_duration_s": 0.05, "min_iterations": 3,
               "target_ci": 0.05, "attention": "eager", "retry_noisy": 2}
MEASURED_WITH = (" --attention=eager --interop-threads=1 --max-duration-s=30"
                 " --max-host-memory-gib=0 --min-duration-s=0.05 --min-iterations=3"
                 " --repeats=1 --retry-noisy=2 --sample-hz=100 --seed=0 --target-ci=0.05"
                 " --threads=2 --timeout-s=1800 --warmup-iterations=1")
COMMAND_LINES = {
    "training_pytorch_cnn_cpu_b8_synthetic_w0_adam_eager":
        "--scenario=training --framework=pytorch --model=cnn --device=cpu --batch=8"
        " --dataset=synthetic --pipeline=w0 --optimizer=adam --optimization=eager"
        " --protocol=4 --epochs=2 --learning-rate=0.003 --decay-epochs=1 --target-accuracy=0.7"
        " --accuracy-tolerance=0.02 --seeds=3 --no-breakdown --ablation --cold-cache"
        " --no-profile" + MEASURED_WITH,
    "train_step_pytorch_tiny-bert_cpu_b2_s16_sgd_eager":
        "--scenario=train_step --framework=pytorch --model=tiny-bert --device=cpu --batch=2"
        " --seqlen=16 --optimizer=sgd --optimization=eager --learning-rate=0.05"
        + MEASURED_WITH,
    "tensorflow_tiny-gpt2_cpu_b2_s8_graph":
        "--framework=tensorflow --model=tiny-gpt2 --device=cpu --batch=2 --seqlen=8"
        " --optimization=graph" + MEASURED_WITH,
    "tensorflow_tiny-gpt2_cpu_graph":  # a group of inference cells
        "--framework=tensorflow --model=tiny-gpt2 --device=cpu --optimization=graph"
        " --batch 1 2 --seqlen 8 128" + MEASURED_WITH,
}


def test_finished_cells_keep_their_command_lines():
    validated = config.validate({
        **TINY_CONFIG, "devices": ["cpu"], "measurement": MEASUREMENT,
        "training": {"models": ["cnn"], "datasets": ["synthetic"], "batch_sizes": [8],
                     "pipelines": ["w0"], "optimizers": ["adam"], "optimizations": ["eager"],
                     "epochs": 2, "seeds": 3, "learning_rate": {"adam": 0.003},
                     "breakdown": False, "cold_cache": True},
        "train_step": {**SECTIONS["train_step"], "learning_rate": {"sgd": 0.05}}})
    cells = {cell.id: cell for cell in expand_cells(validated)}
    group = [c for c in cells.values() if c.group_id == "tensorflow_tiny-gpt2_cpu_graph"]
    lines = {cell_id: " ".join(job_args([cells[cell_id]], False, validated))
             for cell_id in list(COMMAND_LINES)[:3]}
    lines["tensorflow_tiny-gpt2_cpu_graph"] = " ".join(job_args(group, True, validated))
    assert lines == COMMAND_LINES
