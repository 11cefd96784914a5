"""Matrix expansion: every combination, stable readable ids, paths owned by the cell, and
which cells cannot apply."""

import itertools

import pytest
import yaml

from dlbench import scenarios
from dlbench.plan import config
from dlbench.plan.matrix import Cell, expand_cells, group_outputs
from dlbench.scenarios.inference import cell as inference_cell
from tests.conftest import REPO, TINY_CONFIG, tiny_config


def test_product_of_the_axes_with_unique_ids():
    cells = expand_cells(config.validate(TINY_CONFIG))
    assert len(cells) == len(TINY_CONFIG["frameworks"]) * 2 * 2 * 2 * 2 * 2
    assert len({c.id for c in cells}) == len(cells)
    assert {c.scenario for c in cells} == {"inference"}


def test_ids_are_readable_and_stable():
    cell = inference_cell("pytorch", "bert-base-uncased", "cpu", 8, 128, "eager")
    # The id of v1: finished results keep their names and are not measured again.
    assert cell.id == "pytorch_bert-base-uncased_cpu_b8_s128_eager"
    assert cell.params() == {"scenario": "inference", "framework": "pytorch",
                             "model": "bert-base-uncased", "device": "cpu", "batch": 8,
                             "seqlen": 128, "optimization": "eager"}
    assert Cell.from_params(cell.params()) == cell
    assert cell.result_path == "results/runs/pytorch_bert-base-uncased_cpu_b8_s128_eager.json"
    assert cell.group_id == "pytorch_bert-base-uncased_cpu_eager"
    assert cell.log_path("per_cell") == "logs/runs/" + cell.id + ".log"
    assert cell.log_path("per_group") == "logs/groups/pytorch_bert-base-uncased_cpu_eager.log"


def test_group_outputs_are_the_cells_paths():
    cells = expand_cells(config.validate(tiny_config(devices=["cpu"], optimizations=["eager"])))
    patterns, heads, tails = group_outputs(cells)
    assert heads == sorted(f"{framework}_{model}_cpu" for framework in TINY_CONFIG["frameworks"]
                           for model in ("tiny-bert", "tiny-gpt2"))
    assert tails == ["eager"]
    expanded = {p.format(head=h, tail=t) for p in patterns for h in heads for t in tails}
    assert expanded == {c.result_path for c in cells}


def test_optimization_of_the_other_framework_is_unsupported():
    reason = inference_cell("pytorch", "tiny-bert", "cpu", 1, 8, "graph").unsupported_reason()
    assert reason == "optimization 'graph' does not exist in PyTorch (only in TensorFlow)"
    assert inference_cell("tensorflow", "tiny-bert", "cpu", 1, 8, "graph").unsupported_reason() \
        is None


def test_a_cpu_only_recipe_on_a_gpu_is_unsupported_with_its_reason():
    assert inference_cell("pytorch", "tiny-bert", "cpu", 1, 8, "onednn").unsupported_reason() \
        is None
    assert inference_cell("pytorch", "tiny-bert", "gpu", 1, 8, "onednn").unsupported_reason() \
        == ("optimization 'onednn': oneDNN's linear layers run on the CPU (on a GPU cuBLAS "
            "does them)")


def test_sequence_longer_than_the_model_is_unsupported():
    assert inference_cell("pytorch", "gpt2", "cpu", 1, 1024, "eager").unsupported_reason() is None
    reason = inference_cell("pytorch", "bert-base-uncased", "cpu", 1, 1024,
                            "eager").unsupported_reason()
    assert reason == "sequence length 1024 exceeds bert-base-uncased's maximum of 512 positions"


def test_cli_args_name_every_parameter():
    # The command line of v1: Snakemake re-runs a job whose parameters changed.
    args = inference_cell("tensorflow", "tiny-gpt2", "cpu", 2, 16, "graph").cli_args()
    assert args == ["--framework=tensorflow", "--model=tiny-gpt2", "--device=cpu", "--batch=2",
                    "--seqlen=16", "--optimization=graph"]


@pytest.mark.parametrize(("framework", "device", "optimization", "protocol"), [
    ("pytorch", "cpu", "eager", 1), ("tensorflow", "cpu", "xla", 1),
    ("pytorch", "cpu", "torchscript", 2),  # the same attention work as eager
    ("pytorch", "gpu", "compile-bf16", 2),  # … and frozen weights on the CPU
    ("tensorflow", "gpu", "graph", 2),  # no TF32 in fp32, memory growth
])
def test_cells_whose_measurement_changed_get_a_new_command_line(framework, device,
                                                                optimization, protocol):
    """A cell measured differently since v1 names its protocol, so that Snakemake measures
    it again instead of reusing an older result; the others keep their v1 command line."""
    cell = inference_cell(framework, "tiny-bert", device, 1, 8, optimization)
    assert cell.protocol() == protocol
    extra = [f"--protocol={protocol}"] if protocol > 1 else []
    assert cell.cli_args()[6:] == extra
    assert cell.group_cli_args([cell])[-1:] == (extra or ["8"])


PER_FRAMEWORK = {"pytorch": ["eager", "compile"], "tensorflow": ["eager", "graph", "xla"]}


def test_optimizations_per_framework_leave_out_what_does_not_apply():
    frameworks = list(PER_FRAMEWORK)
    one_list = expand_cells(config.validate(tiny_config(frameworks=frameworks, optimizations=[
        "eager", "compile", "graph", "xla"])))
    mapped = expand_cells(config.validate(tiny_config(frameworks=frameworks,
                                                      optimizations=PER_FRAMEWORK)))
    assert {c.optimization for c in mapped if c.framework == "pytorch"} == {"eager", "compile"}
    # The same cells, with the same job commands, as one list's minus those of the other
    # framework's optimizations (N/A by design), in the same order.
    by_design = [c for c in one_list if "does not exist in" in (c.unsupported_reason() or "")]
    assert [c.cli_args() for c in mapped] == [
        c.cli_args() for c in one_list if c not in by_design]
    assert not [c for c in mapped if "does not exist in" in (c.unsupported_reason() or "")]


def test_a_framework_that_measures_inference_only_has_no_training_cells_to_run():
    """ONNX Runtime, a runtime that measures inference only (Framework.scenarios): its
    training cells are not applicable by design, by the phrase the report counts once;
    a per-framework list of training optimizations needs none for it, inference's does."""
    import pandas as pd

    from dlbench.analysis.status import not_applicable

    section = yaml.safe_load((REPO / "config" / "config.yaml").read_text())["training"]
    cells = scenarios.get("training").cells({**section, "optimizations": ["eager"]},
                                            ["pytorch", "onnxruntime"], ["cpu"])
    reasons = {c.framework: c.unsupported_reason() for c in cells}
    assert reasons == {"pytorch": None,
                       "onnxruntime": "scenario 'training' does not exist in ONNX Runtime "
                                      "(it measures inference only)"}
    rows = pd.DataFrame({"status": ["unsupported"], "reason": [reasons["onnxruntime"]]})
    assert not_applicable(rows).tolist() == [True]
    assert scenarios.optimization_problems(
        {"optimizations": {"pytorch": ["eager"]}}, ["pytorch", "onnxruntime"], "training") == []
    assert scenarios.optimization_problems(
        {"optimizations": {"pytorch": ["eager"]}}, ["pytorch", "onnxruntime"], "inference"
    ) == ["optimizations: no list for onnxruntime (name its optimizations, or give one list "
          "for every framework)"]
    assert inference_cell("onnxruntime", "tiny-bert", "cpu", 1, 8, "ort-all"
                          ).unsupported_reason() is None


@pytest.mark.parametrize("path", sorted(REPO.glob("config/**/*.yaml")), ids=lambda p: p.name)
def test_every_shipped_config_expands_to_the_full_product(path, tmp_path):
    """Every framework × model × device × sizes × optimization (its list, or the
    framework's), in this order (the job commands of configs written before the
    per-framework form)."""
    raw = yaml.safe_load(path.read_text())
    if "cifar10" in raw.get("training", {}).get("datasets", []):
        from tests.test_training import fake_cifar10

        raw["data"]["cifar10_dir"] = str(fake_cifar10(tmp_path / "cifar"))
    settings = config.validate(raw)
    expected = []
    for name in settings["scenarios"]:
        section, spec = settings[name], scenarios.get(name)
        sizes = [section[axis.config_key] for axis in spec.axes]
        names = [axis.name for axis in spec.axes]
        expected += [Cell(name, f, m, d, o, tuple(zip(names, s, strict=True)))
                     for f in settings["frameworks"]
                     for m, d, *s, o in itertools.product(
                         section["models"], settings["devices"], *sizes,
                         scenarios.optimizations_for(section, f))]
    assert expand_cells(settings) == expected
