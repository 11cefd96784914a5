"""The train_step scenario without a framework: its cells, ids and reasons, its inputs and
settings, timing a step in parts, and how its repeats combine."""

import json
import time

import numpy as np
import pytest

from dlbench import cli
from dlbench.measure.parts import StepParts, TimedParts
from dlbench.measure.stats import summarize
from dlbench.measure.timing import PhaseClock, steady_state
from dlbench.plan import config
from dlbench.plan.matrix import Cell, expand_cells
from dlbench.scenarios import get
from dlbench.scenarios.train_step import reference_loss

SECTION = {"models": ["tiny-bert", "tiny-xlnet"], "batch_sizes": [1, 2],
           "sequence_lengths": [16, 128], "optimizers": ["sgd", "adam"],
           "optimizations": ["eager", "graph", "fused", "channels-last", "xla-bf16"]}


def train_step_config(**section) -> dict:
    return {"frameworks": ["pytorch", "tensorflow"], "devices": ["cpu"],
            "train_step": {**SECTION, **section}}


def cell(framework="pytorch", model="tiny-bert", optimization="eager", device="cpu",
         batch=2, seqlen=16, optimizer="adam") -> Cell:
    return Cell("train_step", framework, model, device, optimization,
                (("batch", batch), ("seqlen", seqlen), ("optimizer", optimizer)))


def test_cells_cover_every_axis_with_readable_ids():
    cells = expand_cells(config.validate(train_step_config()))
    assert len(cells) == 2 * 2 * 2 * 2 * 2 * 5  # frameworks, models, batches, lengths, …
    assert len({c.id for c in cells}) == len(cells)
    assert cell().id == "train_step_pytorch_tiny-bert_cpu_b2_s16_adam_eager"
    assert cell().result_path == f"results/runs/{cell().id}.json"


@pytest.mark.parametrize(("changes", "reason"), [
    ({}, None),
    ({"optimization": "fused", "optimizer": "sgd"}, None),
    ({"framework": "tensorflow", "optimization": "xla"}, None),
    ({"framework": "tensorflow", "optimization": "legacy-optimizer"}, None),
    ({"optimization": "legacy-optimizer"}, "does not exist in PyTorch training"),
    ({"optimization": "channels-last"},
     "optimization 'channels-last' changes the layout of convolutions; tiny-bert has none"),
    ({"optimization": "cudnn-benchmark", "device": "gpu"},
     "optimization 'cudnn-benchmark' changes the layout of convolutions; tiny-bert has none"),
    ({"optimization": "cudnn-benchmark"}, "cudnn.benchmark tunes cuDNN, which only a GPU has"),
    ({"framework": "tensorflow", "optimization": "channels-first", "device": "gpu"},
     "changes the layout of convolutions; tiny-bert has none"),
    ({"optimization": "graph"}, "does not exist in PyTorch training (only in TensorFlow)"),
    ({"framework": "tensorflow", "optimization": "compile-step"},
     "does not exist in TensorFlow training (only in PyTorch)"),
    ({"seqlen": 128}, "sequence length 128 exceeds tiny-bert's maximum of 64 positions"),
    ({"framework": "tensorflow", "model": "tiny-xlnet", "optimization": "graph-bf16"},
     "TFXLNetModel fails under a mixed-precision Keras policy"),
    ({"model": "tiny-xlnet", "seqlen": 128}, None),  # relative positions: no bound
    ({"framework": "jax", "optimization": "jit-bf16"}, None),
    ({"framework": "jax", "optimization": "eager"}, "does not exist in JAX training"),
    ({"framework": "jax", "model": "tiny-xlnet", "optimization": "jit"},
     "transformers 4.57 has no JAX class for tiny-xlnet (xlnet)"),
    ({"framework": "jax", "model": "tiny-distilbert", "optimization": "jit-fp16"},
     "FlaxDistilBertModel masks attention scores with 1e30"),
])
def test_what_cannot_apply_says_why(changes, reason):
    found = cell(**changes).unsupported_reason()
    assert found == reason if reason is None else reason in found


def test_inputs_are_the_shared_weights_and_reference_of_inference():
    c = cell(model="tiny-gpt2", batch=4, seqlen=32)
    inputs = c.spec.inputs(c)
    assert inputs == {"weights": "results/reference/tiny-gpt2/model.safetensors",
                      "reference": "results/reference/tiny-gpt2/b4_s32.npz"}
    args = c.spec.input_args([c], {k: [v] for k, v in inputs.items()}, group=False)
    assert args == ["--weights=results/reference/tiny-gpt2/model.safetensors",
                    "--reference=results/reference/tiny-gpt2/b4_s32.npz"]


def _run_args(scenario_args: list[str], model: str = "tiny-bert"):
    return cli.parse_args(["run", "--framework=pytorch", f"--model={model}", "--device=cpu",
                           "--optimization=eager", "--out=x.json", *scenario_args])


@pytest.mark.parametrize(("optimizer", "rate"), [("adam", 0.005), ("sgd", 0.01)])
def test_learning_rates_travel_from_the_config_to_the_cell(optimizer, rate):
    section = config.validate(train_step_config(learning_rate={"adam": 0.005}))["train_step"]
    c = cell(optimizer=optimizer)
    args = c.spec.setting_args(section, c)
    assert args == [f"--learning-rate={rate}"]
    parsed = _run_args(["--scenario=train_step", "--batch=2", "--seqlen=16",
                        f"--optimizer={optimizer}", *args])
    assert cli.run_cells(parsed) == [c]
    assert c.spec.settings_from_args(parsed, c) == {"learning_rate": rate}


def test_each_scenario_parses_its_own_settings():
    """Both scenarios declare the learning rate, each its own settings; `dlbench run`
    parses the options of the scenario it names, not another's."""
    parsed = _run_args(["--scenario=training", "--batch=8", "--dataset=digits",
                        "--pipeline=memory", "--optimizer=adam", "--epochs=3"], model="cnn")
    training = cli.run_cells(parsed)[0]
    assert get("training").settings_from_args(parsed, training)["learning_rate"] == 0.001
    assert get("training").settings_from_args(parsed, training)["epochs"] == 3
    parsed = _run_args(["--scenario=train_step", "--batch=2", "--seqlen=16",
                        "--optimizer=sgd"])
    step = cli.run_cells(parsed)[0]
    assert get("train_step").settings_from_args(parsed, step) == {"learning_rate": 0.01}
    with pytest.raises(SystemExit):
        _run_args(["--scenario=train_step", "--batch=2", "--seqlen=16", "--optimizer=sgd",
                   "--epochs=3"])


def test_a_bad_learning_rate_is_a_config_error():
    with pytest.raises(config.ConfigError, match="train_step.learning_rate.adam"):
        config.validate(train_step_config(learning_rate={"adam": 0}))
    with pytest.raises(config.ConfigError, match="key 'train_step.learning_rate.adamw'"):
        config.validate(train_step_config(learning_rate={"adamw": 0.1}))


def test_a_step_is_timed_in_its_parts():
    """Two parts of known length: each part's samples are its own, the whole step's surround
    them, the first part's outputs are kept for every call, and the cold call is apart."""
    calls = []

    def forward():
        calls.append(len(calls))
        time.sleep(0.002)
        return len(calls)

    step = StepParts({"forward_backward": forward, "optimizer": lambda: time.sleep(0.006)}, "test")
    parts = TimedParts(step, lambda: None)
    settings = {"warmup_iterations": 2, "min_duration_s": 0.05, "min_iterations": 5}
    timing = steady_state(parts, lambda: None, settings, PhaseClock(time.time()))
    total = 1 + 2 + timing["iterations"]
    assert parts.outputs == list(range(1, total + 1))
    breakdown = parts.breakdown(3, timing["samples_ms"])
    fb, opt = breakdown["forward_backward"], breakdown["optimizer"]
    assert len(fb["samples_ms"]) == len(opt["samples_ms"]) == timing["iterations"]
    for i, whole in enumerate(timing["samples_ms"]):
        assert fb["samples_ms"][i] + opt["samples_ms"][i] <= whole
    assert 2 <= fb["median_ms"] < opt["median_ms"] and 6 <= opt["median_ms"]
    assert 0.6 < opt["share"] < 0.8 and fb["share"] + opt["share"] <= 1
    assert set(parts.cold_start_s()) == {"forward_backward", "optimizer"}
    assert parts.warmup_s(2) >= 2 * 0.008


def test_a_step_of_one_part_is_not_separable():
    step = StepParts({"step": lambda: 1.0}, "compiled as a whole")
    parts = TimedParts(step, lambda: None)
    for _ in range(3):
        parts()
    assert not step.separable and parts.breakdown(1, [1.0, 1.0]) is None


def _record(samples: dict[str, list[float]], steps: list[float]) -> dict:
    from dlbench.measure.parts import breakdown

    timing = {**summarize(steps), "samples_ms": steps, "iterations": len(steps),
              "loop_s": sum(steps) / 1e3, "cold_start_s": 1.0,
              "breakdown": breakdown(samples, steps)}
    return {"status": "ok", "params": cell().params(), "settings": {"threads": 2},
            "timing": timing, "memory": {"peak_host_rss_mb": 100.0, "sampled_peak_rss_mb": 90.0},
            "utilization": None, "throughput": {}}


def test_repeats_pool_the_parts_and_recompute_throughput():
    first = _record({"forward_backward": [3.0, 3.0], "optimizer": [1.0, 1.0]}, [4.0, 4.0])
    second = _record({"forward_backward": [6.0, 6.0], "optimizer": [2.0, 2.0]}, [8.0, 8.0])
    before = json.loads(json.dumps([first, second]))
    final = get("train_step").combine([first, second])
    assert [first, second] == before  # a new record: the repeats stay as they were
    parts = final["timing"]["breakdown"]
    assert parts["forward_backward"]["samples_ms"] == [3.0, 3.0, 6.0, 6.0]
    assert parts["optimizer"]["samples_ms"] == [1.0, 1.0, 2.0, 2.0]
    assert parts["optimizer"]["share"] == pytest.approx(6 / 24)
    assert final["timing"]["median_ms"] == 6.0
    assert final["throughput"] == {"samples_per_s": pytest.approx(2 / 0.006),
                                   "tokens_per_s": pytest.approx(32 / 0.006)}


def test_the_reference_loss_is_the_cross_entropy_of_the_tied_head():
    rng = np.random.default_rng(0)
    hidden = rng.normal(size=(3, 200, 8)).astype(np.float32)  # 600 tokens: three chunks
    embeddings = rng.normal(size=(50, 8)).astype(np.float32)
    ids = rng.integers(0, 50, size=(3, 200))
    logits = hidden.reshape(-1, 8).astype(np.float64) @ embeddings.T.astype(np.float64)
    log_softmax = logits - np.log(np.exp(logits).sum(axis=1, keepdims=True))
    expected = -log_softmax[np.arange(600), ids.reshape(-1)].mean()
    assert reference_loss(hidden, embeddings, ids) == pytest.approx(expected, rel=1e-12)


def test_the_preset_measures_every_recipe_of_the_three_frameworks_with_both_optimizers():
    from tests.conftest import REPO

    preset = config.load_file(REPO / "config" / "presets" / "train_step.yaml")
    assert preset["scenarios"] == ["train_step"]
    cells = expand_cells(preset)
    runnable = [c for c in cells if c.unsupported_reason() is None]
    assert len(cells) == 3 * 2 * 7 and len(runnable) == 2 * (3 + 4 + 1)
    assert {c.size("optimizer") for c in runnable} == {"sgd", "adam"}
    assert {c.optimization for c in runnable if c.framework == "tensorflow"} == {
        "eager", "graph", "xla", "legacy-optimizer"}
    assert {c.optimization for c in runnable if c.framework == "jax"} == {"jit"}
