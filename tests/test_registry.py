"""The framework registry: every registered framework declares itself in its own folder
(dlbench.frameworks.<name>.about), and its operations implement each scenario's declared
interface. The per-framework tests here are generated from the registry: a framework gets
them by registering."""

import dataclasses
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from dlbench import scenarios
from dlbench.catalogue import frameworks
from dlbench.catalogue.axes import DEVICES, FRAMEWORK_LABELS, FRAMEWORKS
from dlbench.catalogue.models import FAMILIES
from dlbench.frameworks.conformance import problems
from dlbench.measure import env
from dlbench.run import peak
from dlbench.scenarios.inference_ops import InferenceOps
from tests.conftest import REPO, tool_env

SCENARIOS = [name for name, s in scenarios.scenarios().items() if s.ops_interface]


@pytest.mark.parametrize("name", frameworks.REGISTERED)
def test_a_registered_framework_declares_itself_in_its_folder(name):
    framework = frameworks.get(name)
    assert framework.name == name and framework.label
    assert (REPO / framework.environment).is_file()
    assert framework.distributions
    assert framework.model_classes and set(framework.model_classes) <= set(FAMILIES)
    assert set(framework.no_mixed_precision) <= set(framework.model_classes)
    assert set(framework.no_family) <= set(FAMILIES)
    assert set(framework.inference_protocol) <= set(DEVICES)
    assert framework.gemm_libraries[0].default, "its default library comes first"
    # What the report's GPU and mixed-precision sections say of it.
    assert framework.gpu_timing and framework.gpu_memory and framework.mixed_precision
    for library in framework.gemm_libraries:
        assert set(library.devices) <= set(DEVICES)


def test_the_axes_listings_and_peak_libraries_come_from_the_registry():
    assert FRAMEWORKS == frameworks.REGISTERED
    assert list(FRAMEWORK_LABELS) == list(frameworks.REGISTERED)
    assert len(set(FRAMEWORK_LABELS.values())) == len(FRAMEWORKS)
    for framework in frameworks.declarations():
        assert set(framework.distributions) <= set(env.LIBRARIES)
        for library in framework.gemm_libraries:
            assert peak.LIBRARIES[library.key].framework == framework.name
    assert len(peak.LIBRARIES) == sum(len(f.gemm_libraries) for f in frameworks.declarations())
    assert frameworks.REFERENCE_FRAMEWORK in frameworks.REGISTERED


def test_an_unregistered_framework_is_refused():
    with pytest.raises(ValueError, match="unknown framework 'caffe'"):
        frameworks.get("caffe")


def test_a_family_without_a_class_in_a_framework_is_unsupported_there(monkeypatch):
    """The framework's declaration decides, not a name in the scenario: a TensorFlow
    without an XLM class makes its XLM cells unsupported, and only those."""
    from dlbench.scenarios.inference import cell

    declared = frameworks.get("tensorflow")
    classes = {k: v for k, v in declared.model_classes.items() if k != "xlm"}
    planted = dataclasses.replace(declared, model_classes=classes)
    real = frameworks.get
    monkeypatch.setattr(frameworks, "get", lambda name: planted if name == "tensorflow"
                        else real(name))
    assert cell("tensorflow", "tiny-xlm", "cpu", 1, 8, "eager").unsupported_reason() == (
        "transformers 4.57 has no TensorFlow class for tiny-xlm (xlm)")
    assert cell("tensorflow", "tiny-bert", "cpu", 1, 8, "eager").unsupported_reason() is None
    assert cell("pytorch", "tiny-xlm", "cpu", 1, 8, "eager").unsupported_reason() is None


def test_the_registry_imports_nothing_heavy():
    """The declarations and what is built from them (axes, the fingerprint's packages, the
    peak's libraries) import no framework; the registry and axes not even numpy."""
    script = ("import sys\n"
              "heavy = lambda: sorted({m.split('.')[0] for m in sys.modules} & {'torch', "
              "'tensorflow', 'jax', 'transformers', 'numpy'})\n"
              "from dlbench.catalogue import frameworks, axes\n"
              "frameworks.declarations(); print(heavy())\n"
              "from dlbench.measure import env\n"
              "from dlbench.run import peak\n"
              "print([m for m in heavy() if m != 'numpy'])\n")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         env=tool_env(), cwd=REPO, timeout=120, check=True).stdout
    assert out.split("\n")[:2] == ["[]", "[]"]


# -- each framework's operations against each scenario's interface, in a process of its own
# (a process imports one framework, as a cell does)

_CHECK = """
import importlib, importlib.util, json, sys, typing
from dlbench import scenarios
from dlbench.frameworks.conformance import problems
from dlbench.scenarios.inference_ops import ReferenceOps

package, reference, found = sys.argv[1], sys.argv[2] == "reference", {}
measured = None if sys.argv[3] == "*" else sys.argv[3].split(",")
sys.path[:0] = sys.argv[4:]
for name, scenario in scenarios.scenarios().items():
    if scenario.ops_interface is None or (measured is not None and name not in measured):
        continue
    if importlib.util.find_spec(f"{package}.{name}") is None:
        found[name] = [f"no module {package}.{name}"]
        continue
    try:
        module = importlib.import_module(f"{package}.{name}")
    except ModuleNotFoundError as exc:  # the framework itself
        found = {"not installed": exc.name}
        break
    ops = typing.get_type_hints(module.make_ops)["return"]
    found[name] = problems(ops, scenario.ops_interface)
    if name == "inference" and reference:
        found["reference"] = problems(ops, ReferenceOps)
print(json.dumps(found))
"""


def _check(package: str, reference: bool = False, path: str = "",
           measures: tuple[str, ...] | None = None) -> dict[str, Any]:
    """The problems of a framework package's operations per scenario it measures (None:
    every one), found in a child process (which imports the framework, as a cell does)."""
    run = subprocess.run([sys.executable, "-c", _CHECK, package,
                          "reference" if reference else "",
                          "*" if measures is None else ",".join(measures),
                          *([path] if path else [])],
                         capture_output=True, text=True, env=tool_env(), cwd=REPO, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    return json.loads(run.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def conformance():
    """Per registered framework (checked once): each scenario's problems."""
    checked: dict[str, dict] = {}

    def of(framework: str) -> dict:
        if framework not in checked:
            checked[framework] = _check(f"dlbench.frameworks.{framework}",
                                        reference=framework == frameworks.REFERENCE_FRAMEWORK,
                                        measures=frameworks.get(framework).scenarios)
        found = checked[framework]
        if "not installed" in found:
            pytest.skip(f"{framework}: {found['not installed']} is not installed here")
        return found

    return of


@pytest.mark.parametrize("scenario", SCENARIOS)
@pytest.mark.parametrize("framework", frameworks.REGISTERED)
def test_a_frameworks_operations_implement_the_scenarios_interface(conformance, framework,
                                                                   scenario):
    if not frameworks.get(framework).measures(scenario):  # declared: none needed
        assert scenario not in conformance(framework)
    else:
        assert conformance(framework)[scenario] == []


def test_the_reference_framework_also_writes_the_shared_weights(conformance):
    assert conformance(frameworks.REFERENCE_FRAMEWORK)["reference"] == []


def test_a_planted_framework_fails_the_generated_check(tmp_path: Path):
    """A framework folder whose training operations lack a method and that has no
    inference module, through the same check as every registered framework."""
    folder = tmp_path / "planted"
    folder.mkdir()
    (folder / "__init__.py").write_text("")
    (folder / "training.py").write_text(
        "class Ops:\n"
        "    def build(self, spec, weights, optimization): ...\n"
        "def make_ops(backend) -> Ops:\n    return Ops()\n")
    found = _check("planted", path=str(tmp_path))
    assert "optimizer(): missing" in found["training"]
    assert not any(p.startswith("build()") for p in found["training"])
    assert found["inference"] == ["no module planted.inference"]


def test_an_inference_only_framework_needs_only_its_inference_operations(tmp_path: Path):
    """A planted framework folder with an inference module and nothing else: checked as
    one that measures inference only, it lacks nothing for the other scenarios; checked
    as one that measures all, it lacks their modules."""
    folder = tmp_path / "runtime"
    folder.mkdir()
    (folder / "__init__.py").write_text("")
    body = "".join(f"    def {name}{signature}: ...\n" for name, signature in (
        ("build", "(self, spec, seed, optimization, weights=None, attention='sdpa')"),
        ("inputs", "(self, token_ids)"), ("same_attention_work", "(self, model, inputs)"),
        ("to_numpy", "(self, output)"), ("attention", "(self, model)"),
        ("compilation", "(self)"), ("precision_ops", "(self, model, inputs, optimization)"),
        ("release", "(self)"), ("versions", "(self)")))
    (folder / "inference.py").write_text(
        f"class Ops:\n    recipes = {{}}\n{body}def make_ops(backend) -> Ops:\n"
        "    return Ops()\n")
    assert _check("runtime", path=str(tmp_path), measures=("inference",)) == {
        "inference": []}
    everything = _check("runtime", path=str(tmp_path))
    assert everything["inference"] == []
    assert everything["training"] == ["no module runtime.training"]


# -- the check itself, on planted classes: it must be able to fail


def _recipe(model, inputs, optimization):
    return lambda: model


class _Complete:
    recipes = {"eager": _recipe}

    def build(self, spec, seed, optimization, weights=None, attention="sdpa", extra=1): ...
    def inputs(self, token_ids): ...
    def same_attention_work(self, model, inputs): ...
    def to_numpy(self, output): ...
    def attention(self, model): ...
    def compilation(self): ...
    def precision_ops(self, model, inputs, optimization): ...
    def release(self): ...
    def versions(self): ...


def _planted(without: str = "", **members: Any) -> type:
    """_Complete less `without`, with `members` replaced."""
    body = {k: v for k, v in vars(_Complete).items() if k != without}
    return type("Planted", (), {**body, **members})


def test_the_check_passes_a_complete_implementation():
    assert problems(_Complete, InferenceOps) == []


def test_the_check_finds_a_missing_method_or_member():
    assert problems(_planted(without="precision_ops"), InferenceOps) == [
        "precision_ops(): missing"]
    assert problems(_planted(without="recipes"), InferenceOps) == [
        "recipes: missing (declare it on the class)"]


def test_the_check_finds_a_method_the_scenario_cannot_call():
    def renamed(self, spec, seed, precision, weights=None, attention="sdpa"): ...
    def no_default(self, spec, seed, optimization, weights, attention="sdpa"): ...
    def too_few(self, token_ids): ...
    def required_extra(self, model, inputs, optimization, cache): ...

    assert problems(_planted(build=renamed), InferenceOps) == [
        "build(): parameter 3 is precision, not optimization"]
    assert problems(_planted(build=no_default), InferenceOps) == [
        "build(): weights needs a default (the interface's may be left out)"]
    assert problems(_planted(same_attention_work=too_few), InferenceOps) == [
        "same_attention_work(): parameter 1 is token_ids, not model",
        "same_attention_work(): parameter 2 is nothing, not inputs"]
    assert problems(_planted(precision_ops=required_extra), InferenceOps) == [
        "precision_ops(): extra parameter cache needs a default"]
