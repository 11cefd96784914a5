"""The recipe registry: recipes declared in each framework's folder, collected once for every
scenario, with the precision held by the optimization, never read from its name."""

import importlib
import subprocess
import sys

import pytest

from dlbench import scenarios
from dlbench.analysis.summary import derive
from dlbench.catalogue import recipes
from dlbench.catalogue.recipes import INFERENCE, TRAINING, Recipe
from dlbench.scenarios.inference import cell as Cell
from tests.conftest import tool_env

# Ends in "-bf16" but is declared in fp32 only: its precision must not come from its name.
PLANTED = Recipe("planted-bf16", "a recipe only PyTorch declares (a test)", INFERENCE,
                 precisions=("fp32",))


@pytest.fixture
def plant(monkeypatch):
    """Declare extra recipes in a framework's recipes module, for one test."""
    def plant(framework: str, *extra: Recipe) -> None:
        module = importlib.import_module(f"dlbench.frameworks.{framework}.recipes")
        monkeypatch.setattr(module, "RECIPES", (*module.RECIPES, *extra))
        recipes._registry.cache_clear()

    yield plant
    monkeypatch.undo()  # the modules as declared, before the registry is collected again
    recipes._registry.cache_clear()


def test_a_recipe_declared_in_a_framework_is_that_frameworks_only(plant):
    assert "planted-bf16" not in recipes.optimizations("inference")
    plant("pytorch", PLANTED)
    known = recipes.optimizations("inference")["planted-bf16"]
    assert known.frameworks == {"pytorch"} and known.recipe is PLANTED
    assert "planted-bf16" in scenarios.get("inference").optimizations()
    assert "planted-bf16" not in recipes.optimizations("training")  # inference's only
    assert Cell("pytorch", "tiny-bert", "cpu", 1, 8, "planted-bf16").unsupported_reason() is None
    assert Cell("tensorflow", "tiny-bert", "cpu", 1, 8, "planted-bf16").unsupported_reason() \
        == "optimization 'planted-bf16' does not exist in TensorFlow (only in PyTorch)"


def test_the_precision_is_the_declared_one_not_the_names_suffix(plant):
    plant("pytorch", PLANTED)
    assert recipes.optimization("inference", "planted-bf16").precision.name == "fp32"
    # What a cell's arithmetic is set to (dlbench.run.cell) and the peak it is held to.
    assert scenarios.get("inference").precision("planted-bf16") == "fp32"
    # The summary of a cell that recorded no precision (an unsupported one).
    import pandas as pd

    summary = derive(pd.DataFrame([
        {"scenario": "inference", "optimization": "planted-bf16", "status": "unsupported"},
        {"scenario": "inference", "optimization": "eager-bf16", "status": "unsupported"},
        {"scenario": "inference", "optimization": "gone-fp16", "status": "unsupported"}]))
    assert list(summary["precision"]) == ["fp32", "bf16", "fp16"]  # unknown: its name's


def test_a_name_shared_by_frameworks_exists_where_each_declares_it(plant):
    own = Recipe("shared", "TensorFlow's", TRAINING, precisions=("fp32", "bf16"))
    plant("pytorch", Recipe("shared", "PyTorch's", TRAINING, precisions=("fp32",)))
    plant("tensorflow", own)
    assert recipes.optimization("training", "shared").frameworks == {"pytorch", "tensorflow"}
    assert recipes.optimization("train_step", "shared-bf16").frameworks == {"tensorflow"}
    assert recipes.optimization("training", "shared", "tensorflow").recipe is own
    assert recipes.optimization("training", "shared-bf16", "pytorch").recipe is own
    assert recipes.optimization("training", "shared-bf16").unsupported_reason(
        "pytorch", "cpu") == ("optimization 'shared-bf16' does not exist in PyTorch training "
                              "(only in TensorFlow)")


def test_one_name_is_one_kind_and_one_precision(plant):
    plant("pytorch", Recipe("odd", "eager here", INFERENCE, precisions=("fp32",)))
    plant("tensorflow", Recipe("odd", "compiled here", INFERENCE, compiled=True,
                               precisions=("fp32",)))
    with pytest.raises(ValueError, match="'odd' differs between frameworks"):
        recipes.optimizations("inference")


def test_a_framework_declares_a_name_once_per_scenario(plant):
    plant("pytorch", Recipe("torchscript", "again", INFERENCE))
    with pytest.raises(ValueError, match="pytorch declares the inference optimization "
                       "'torchscript' twice"):
        recipes.optimizations("inference")


def test_every_recipe_serves_registered_scenarios_in_known_precisions():
    registered = set(scenarios.scenarios())
    for framework in ("pytorch", "tensorflow"):
        for recipe in recipes.declared(framework):
            assert set(recipe.scenarios) <= registered, recipe.name
            assert recipe.precisions and recipe.precisions[0] == "fp32", recipe.name
    with pytest.raises(ValueError, match="unknown precisions"):
        Recipe("x", "a precision nobody has", INFERENCE, precisions=("fp8",))


def test_the_registry_imports_no_framework():
    code = ("import sys\nfrom dlbench.catalogue import recipes\n"
            "names = [n for s in ('inference', 'training') for n in recipes.optimizations(s)]\n"
            "print(len(names), sorted({'torch', 'tensorflow', 'jax', 'transformers'} "
            "& set(sys.modules)))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, env=tool_env())
    assert done.returncode == 0, done.stderr[-2000:]
    count, imported = done.stdout.split(" ", 1)
    assert int(count) > 20 and imported.strip() == "[]"
