"""Transformer training steps in every framework for real, through `dlbench run` on tiny
models with the shared weights: valid results with both parts timed, the same initial loss
in every framework, and a loss that falls over the steps."""

import json
import subprocess
import sys

import pytest

from dlbench.catalogue import frameworks, recipes
from dlbench.records import result
from tests.conftest import one_framework, tool_env

# Real `dlbench run` processes in every framework: end-to-end, left out of the quick subset.
pytestmark = pytest.mark.slow

FRAMEWORKS = frameworks.measuring("train_step")
# Each framework's step eager where it has one, else as its users run it (JAX: jax.jit).
RECIPE = {f: "eager" if f in recipes.optimization("train_step", "eager").frameworks
          else frameworks.get(f).default_step for f in FRAMEWORKS}
BATCH, SEQLEN = 2, 16
QUICK = ["--warmup-iterations=1", "--min-duration-s=0.1", "--min-iterations=10"]


def shared_inputs(folder, model: str) -> tuple[str, str]:
    """The seeded weights and the reference output of the model, made as the workflow's
    reference rules make them (one process for both)."""
    weights, output = folder / model / "model.safetensors", folder / model / "ref.npz"
    code = ("import sys; from pathlib import Path; from dlbench import reference as r; "
            "m, w, o = sys.argv[1:]; r.write_weights(m, 0, Path(w), 2); "
            f"r.write_output(m, {BATCH}, {SEQLEN}, 0, Path(w), Path(o), 2)")
    subprocess.run([sys.executable, "-c", one_framework(frameworks.REFERENCE_FRAMEWORK, code),
                    model, str(weights), str(output)], check=True,
                   env=tool_env(), capture_output=True, timeout=300)
    return str(weights), str(output)


def run_cell(out, framework: str, model: str, optimizer: str, optimization: str,
             weights: str, reference: str) -> dict:
    command = [sys.executable, "-m", "dlbench", "run", "--scenario=train_step",
               f"--framework={framework}", f"--model={model}", "--device=cpu",
               f"--batch={BATCH}", f"--seqlen={SEQLEN}", f"--optimizer={optimizer}",
               f"--optimization={optimization}", f"--weights={weights}",
               f"--reference={reference}", *QUICK, f"--out={out}"]
    run = subprocess.run(command, env=tool_env(), capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    return result.read(out)  # validated against the schema, this scenario's part included


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    """shared_inputs of a model, made once for the module's tests (a process of ~5 s)."""
    made: dict[str, tuple[str, str]] = {}

    def of(model: str) -> tuple[str, str]:
        if model not in made:
            made[model] = shared_inputs(tmp_path_factory.mktemp("inputs"), model)
        return made[model]
    return of


# tiny-bert with Adam in the quick tests; a second family (GPT-2) with SGD in the slow ones.
@pytest.fixture(scope="module", params=[
    ("tiny-bert", "adam"), pytest.param(("tiny-gpt2", "sgd"), marks=pytest.mark.slow)],
    ids=lambda p: "-".join(p))
def records(request, tmp_path_factory, inputs) -> dict[str, dict]:
    model, optimizer = request.param
    folder = tmp_path_factory.mktemp("train_step")
    weights, reference = inputs(model)
    return {framework: run_cell(folder / f"{framework}.json", framework, model, optimizer,
                                RECIPE[framework], weights, reference)
            for framework in FRAMEWORKS}


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_a_step_is_timed_whole_and_in_its_parts(records, framework):
    record = records[framework]
    assert record["status"] == "ok", record["reason"]
    timing, step = record["timing"], record["step"]
    assert step["separable"] and step["parts"] == ["forward_backward", "optimizer"]
    assert record["arithmetic"]["tf32"] is False  # float32 as in every scenario
    assert timing["iterations"] >= 10
    parts = timing["breakdown"]
    for name in step["parts"]:
        assert len(parts[name]["samples_ms"]) == timing["iterations"]
        assert 0 < parts[name]["share"] < 1
    for i, whole in enumerate(timing["samples_ms"]):
        assert parts["forward_backward"]["samples_ms"][i] + \
            parts["optimizer"]["samples_ms"][i] <= whole
    assert record["throughput"]["tokens_per_s"] == pytest.approx(
        record["throughput"]["samples_per_s"] * SEQLEN)
    assert record["throughput"]["samples_per_s"] == pytest.approx(
        BATCH / timing["median_ms"] * 1e3)
    assert record["settings"]["learning_rate"] > 0
    assert record["settings"]["weights"].endswith("model.safetensors")


def test_every_framework_starts_from_the_same_loss(records):
    """The same weights and the same loss function: the loss before training (dropout
    off) agrees between the frameworks, and with the reference's, to fp32 rounding."""
    first = records[frameworks.REFERENCE_FRAMEWORK]["loss"]["initial"]
    for framework in FRAMEWORKS:
        assert records[framework]["loss"]["initial"] == pytest.approx(first, rel=1e-5)
    for record in records.values():
        check = record["correctness"]
        assert check["within_tolerance"] and check["max_rel_error"] < 1e-5
        assert check["precision"] == "fp32" and check["reference_file"].endswith("ref.npz")


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_the_loss_falls_over_the_steps(records, framework):
    loss = records[framework]["loss"]
    assert loss["finite"] and loss["steps"] >= 12  # the first, one warm-up, ten timed
    first = loss["first_steps"]
    assert len(first) == 10 and first[0] == loss["first"]
    assert first[-1] < first[0] - 0.05  # over the first ten steps …
    assert loss["last"] < first[-1]  # … and on to the last


@pytest.mark.parametrize("framework", [f for f in FRAMEWORKS if RECIPE[f] != "eager"])
def test_a_compiled_step_compiles_once(records, framework):
    """JAX's two jitted functions compiled again at the first warm-up step (12.7 s on an
    H100): the loss scale and step count started as uncommitted arrays, the update's
    outputs that replaced them were committed. Each now compiles once, and a retrace
    would be counted and flagged."""
    compiled = records[framework]["compilation"]
    assert compiled["recompiles"] == 0 and compiled["graphs"] == 1, compiled
    assert not records[framework]["flags"]["not_one_graph"]
    timing = records[framework]["timing"]
    assert max(timing["warmup_ms"]) < 20 * timing["median_ms"]  # no compilation in it


def test_an_eager_step_counts_no_graphs(records):
    eager = records["pytorch"]
    assert eager["compilation"] is None and not eager["flags"]["not_one_graph"]


@pytest.mark.slow
def test_compiled_steps(tmp_path, inputs):
    """torch.compile of the whole step is one part; XLA still times both of TensorFlow's
    functions, and the compilation is the first step's, not the loop's. The compiled step
    records dynamo's graphs, graph breaks and recompilations, and is flagged `not one
    graph` where dynamo split the step (as inference cells are)."""
    weights, reference = inputs("tiny-bert")
    whole = run_cell(tmp_path / "pt.json", "pytorch", "tiny-bert", "adam", "compile-step",
                     weights, reference)
    assert whole["status"] == "ok", whole["reason"]
    assert not whole["step"]["separable"] and whole["step"]["parts"] == ["step"]
    assert "breakdown" not in whole["timing"]
    assert "torch.compile" in whole["step"]["implementation"]
    graphs = whole["compilation"]
    assert graphs["graphs"] >= 1
    # One program would be one graph and no break; what dynamo made is flagged if not.
    one = graphs["graphs"] == 1 and not graphs["graph_breaks"] and not graphs["recompiles"]
    assert whole["flags"]["not_one_graph"] == (not one)
    assert len(graphs["break_reasons"]) <= 5  # the first reasons, not all
    if graphs["graph_breaks"]:
        assert graphs["break_reasons"]  # each break says why (e.g. Tensor.backward())
    xla = run_cell(tmp_path / "tf.json", "tensorflow", "tiny-bert", "adam", "xla",
                   weights, reference)
    assert xla["status"] == "ok", xla["reason"]
    assert xla["step"]["separable"] and "XLA" in xla["step"]["implementation"]
    for record in (whole, xla):
        assert record["timing"]["cold_start_s"] > 5 * record["timing"]["median_ms"] / 1e3
        assert record["loss"]["last"] < record["loss"]["first"]
        assert record["correctness"]["within_tolerance"]
    assert xla["loss"]["initial"] == pytest.approx(whole["loss"]["initial"], rel=1e-5)
    for record in (whole, xla):  # strict JSON: no NaN from an empty part or a loss
        json.dumps(record, allow_nan=False)


@pytest.mark.slow
def test_tensorflows_legacy_optimizer(tmp_path, inputs):
    """tf.keras.optimizers.legacy: the update as one C++ kernel per variable, the same
    training otherwise."""
    weights, reference = inputs("tiny-bert")
    record = run_cell(tmp_path / "tf.json", "tensorflow", "tiny-bert", "adam",
                      "legacy-optimizer", weights, reference)
    assert record["status"] == "ok", record["reason"]
    assert "legacy" in record["step"]["implementation"]
    assert "one C++ kernel per variable" in record["step"]["implementation"]
    assert record["step"]["separable"] and record["correctness"]["within_tolerance"]
    assert record["loss"]["last"] < record["loss"]["first"]


@pytest.mark.slow
def test_jax_fp16_scales_its_loss(tmp_path, inputs):
    """JAX in fp16: the Flax modules compute in float16, the loss scaled dynamically as
    PyTorch's GradScaler does; the loss falls and stays finite (unscaled, a step in float16
    would underflow its gradients or overflow)."""
    from dlbench.frameworks import cpu_precision_problem

    weights, reference = inputs("tiny-bert")
    record = run_cell(tmp_path / "jax.json", "jax", "tiny-bert", "adam", "jit-fp16",
                      weights, reference)
    problem = cpu_precision_problem("fp16")
    if problem:  # this CPU has no native fp16
        assert (record["status"], record["reason"]) == ("unsupported", problem)
        return
    assert record["status"] == "ok", record["reason"]
    assert "dynamic loss scaling" in record["step"]["how"]
    assert record["correctness"]["within_tolerance"]
    assert record["loss"]["finite"] and record["loss"]["last"] < record["loss"]["first"]
