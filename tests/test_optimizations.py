"""Optimizations and the correctness check, in the real frameworks on the tiny models:
every recipe and precision that applies here runs and validates, the output of every cell is
checked against PyTorch eager fp32 on the same weights, a planted wrong answer is flagged,
and what cannot apply is `unsupported` with its reason."""

import copy
import json
import re
import subprocess
import sys

import numpy as np
import pytest

from dlbench.catalogue import frameworks, recipes
from dlbench.catalogue.models import MODELS
from dlbench.catalogue.precisions import PRECISIONS
from dlbench.catalogue.recipes import TEST_RECIPES_VARIABLE
from dlbench.frameworks import cpu_precision_problem
from dlbench.measure.correctness import compare, load_reference, save_reference
from dlbench.records import result
from dlbench.scenarios.inference import cell as Cell
from tests.conftest import REPO, one_framework, tool_env

FAST = ["--warmup-iterations=1", "--min-duration-s=0.05", "--min-iterations=3"]
MODELS_HERE = ["tiny-bert", "tiny-distilgpt2", "tiny-xlm", "tiny-xlnet", "tiny-roberta",
               "tiny-distilbert"]
BATCH, SEQLEN = 2, 16
REPORT = REPO / "workflow" / "notebooks" / "report.py"


def python(*args: str, timeout: int = 300, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *args], capture_output=True, text=True,
                          timeout=timeout, env=tool_env(**env))


@pytest.fixture(scope="module")
def references(tmp_path_factory):
    """Weights and reference outputs of the tiny models, as the workflow's rules make them
    (in one process here, to pay PyTorch's import once)."""
    root = tmp_path_factory.mktemp("reference")
    code = f"""
from pathlib import Path
from dlbench.reference import write_output, write_weights
root = Path({str(root)!r})
for model in {MODELS_HERE!r}:
    weights = root / model / "model.safetensors"
    write_weights(model, 0, weights, threads=2)
    write_output(model, {BATCH}, {SEQLEN}, 0, weights, root / model / "b{BATCH}_s{SEQLEN}.npz",
                 threads=2)
"""
    done = python("-c", one_framework(frameworks.REFERENCE_FRAMEWORK, code))
    assert done.returncode == 0, done.stderr[-3000:]
    return root


def run_cell(tmp_path, references, framework, model, optimization, **env) -> dict:
    out = cell_file(tmp_path, framework, model, optimization)
    done = python(
        "-m", "dlbench", "run", *FAST, f"--framework={framework}", f"--model={model}",
        "--device=cpu", f"--batch={BATCH}", f"--seqlen={SEQLEN}",
        f"--optimization={optimization}", f"--weights={references / model / 'model.safetensors'}",
        f"--reference={references / model / f'b{BATCH}_s{SEQLEN}.npz'}", f"--out={out}", **env)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    record = json.loads(out.read_text())
    result.validate(record)
    return record


def cell_file(folder, framework, model, optimization):
    return folder / f"{framework}_{model}_{optimization}.json"


@pytest.fixture(scope="module")
def cells(tmp_path_factory, references):
    """run_cell's record of a (framework, model, optimization), each cell run once in this
    module for every test that reads it (each process imports its framework and
    transformers: seconds of CPU), its file in cells.folder. The test recipes are on in
    every cell, as the planted error needs: they add that recipe and change nothing in
    another (an eager cell's record differed in its timings and memory only, tried)."""
    folder = tmp_path_factory.mktemp("cells")
    made: dict[tuple[str, str, str], dict] = {}

    def cell(framework: str, model: str, optimization: str) -> dict:
        key = (framework, model, optimization)
        if key not in made:
            made[key] = run_cell(folder, references, *key, **{TEST_RECIPES_VARIABLE: "1"})
        return copy.deepcopy(made[key])

    cell.folder = folder
    return cell


def expected_problem(optimization: str) -> str | None:
    """Why this CPU cannot run the optimization's precision (bf16/fp16 need native units)."""
    return cpu_precision_problem(recipes.optimization("inference", optimization)
                                 .precision.name)


# -- the registry ------------------------------------------------------------------------


def test_every_recipe_combines_with_its_precisions_under_config_friendly_names():
    for framework in frameworks.REGISTERED:
        for recipe in recipes.declared(framework):
            if "inference" not in recipe.scenarios:
                continue
            for precision in recipe.precisions:
                name = recipe.name + PRECISIONS[precision].suffix
                known = recipes.optimization("inference", name, framework)
                assert known.recipe is recipe and known.precision.name == precision
    names = recipes.optimizations("inference")
    assert all(re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", name) for name in names)
    assert {"eager", "torchscript", "compile", "compile-max-autotune", "compile-reduce-overhead",
            "eager-bf16", "eager-fp16", "compile-bf16", "graph", "xla", "xla-bf16",
            "graph-fp16"} <= set(names)


def test_the_planted_error_recipe_exists_only_for_the_tests():
    code = ("from dlbench.catalogue.recipes import optimizations; "
            "print('planted-error' in optimizations('inference'))")
    assert python("-c", code).stdout.strip() == "False"
    assert python("-c", code, **{TEST_RECIPES_VARIABLE: "1"}).stdout.strip() == "True"
    done = python("-m", "dlbench", "run", "--framework=pytorch", "--model=tiny-bert",
                  "--device=cpu", "--batch=1", "--seqlen=8", "--optimization=planted-error",
                  "--out=/dev/null")
    assert done.returncode == 2 and "invalid choice: 'planted-error'" in done.stderr


@pytest.mark.parametrize(
    ("cell", "reason"),
    [
        (Cell("pytorch", "tiny-bert", "cpu", 1, 8, "xla"),
         "optimization 'xla' does not exist in PyTorch (only in TensorFlow)"),
        (Cell("tensorflow", "tiny-bert", "cpu", 1, 8, "compile-bf16"),
         "optimization 'compile-bf16' does not exist in TensorFlow (only in PyTorch)"),
        (Cell("pytorch", "tiny-bert", "cpu", 1, 8, "compile-reduce-overhead"),
         "optimization 'compile-reduce-overhead': CUDA graphs (torch.compile mode "
         "reduce-overhead) need a GPU"),
        (Cell("tensorflow", "tiny-xlnet", "cpu", 1, 8, "xla-bf16"),
         "optimization 'xla-bf16' on tiny-xlnet: transformers 4.57's TFXLNetModel fails under "
         "a mixed-precision Keras policy (its relative attention mixes float32 and "
         "reduced-precision tensors)"),
        (Cell("jax", "tiny-xlm", "cpu", 1, 8, "jit"),
         "transformers 4.57 has no JAX class for tiny-xlm (xlm)"),
        (Cell("tensorflow", "tiny-bert", "cpu", 1, 8, "jit"),
         "optimization 'jit' does not exist in TensorFlow (only in JAX)"),
        (Cell("jax", "tiny-distilbert", "gpu", 1, 8, "eager-fp16"),
         "optimization 'eager-fp16' on tiny-distilbert: transformers 4.57's "
         "FlaxDistilBertModel masks attention scores with 1e30 × (1 − mask), which is "
         "inf × 0 = NaN in float16"),
        (Cell("pytorch", "roberta-base", "cpu", 1, 513, "eager"),
         "sequence length 513 exceeds roberta-base's maximum of 512 positions"),
    ],
)
def test_inapplicable_combinations_have_a_reason(cell, reason):
    assert cell.unsupported_reason() == reason


def test_applicable_combinations_have_none():
    assert Cell("pytorch", "tiny-bert", "gpu", 1, 8, "compile-reduce-overhead-bf16"
                ).unsupported_reason() is None
    assert Cell("pytorch", "tiny-xlnet", "cpu", 1, 8, "eager-bf16").unsupported_reason() is None
    assert Cell("tensorflow", "xlnet-base-cased", "cpu", 8, 4096, "xla").unsupported_reason() \
        is None  # relative positions: no maximum length
    assert Cell("tensorflow", "roberta-base", "cpu", 1, 512, "xla").unsupported_reason() is None
    assert Cell("jax", "gpt2", "gpu", 1, 1024, "jit-fp16").unsupported_reason() is None
    assert Cell("jax", "tiny-distilbert", "cpu", 1, 8, "jit-bf16").unsupported_reason() is None


def test_the_2019_models_have_both_frameworks_and_a_tiny_variant():
    both = [frameworks.get("pytorch"), frameworks.get("tensorflow")]
    for name in ("roberta-base", "distilgpt2", "xlnet-base-cased", "xlm-mlm-en-2048"):
        spec = MODELS[name]
        assert all(framework.model_class(spec.family) for framework in both)
        assert any(m.family == spec.family and m.name.startswith("tiny-") for m in
                   MODELS.values())
    assert MODELS["xlm-mlm-en-2048"].params["emb_dim"] == 2048
    assert MODELS["distilgpt2"].params["n_layer"] == 6


# -- the correctness check ---------------------------------------------------------------


def test_compare_flags_errors_beyond_the_precision_tolerance():
    reference = np.linspace(-4, 4, 48, dtype=np.float32).reshape(2, 3, 8)
    fp32, bf16 = PRECISIONS["fp32"], PRECISIONS["bf16"]
    same = compare(reference.copy(), reference, "ref.npz", fp32)
    assert same["max_abs_error"] == 0 and same["within_tolerance"] is True
    off = compare(reference * 1.01, reference, "ref.npz", fp32)
    assert off["max_rel_error"] == pytest.approx(0.01, rel=1e-3)
    assert off["within_tolerance"] is False
    assert compare(reference * 1.01, reference, "ref.npz", bf16)["within_tolerance"] is True
    broken = reference.copy()
    broken[0, 0, 0] = np.nan
    nan = compare(broken, reference, "ref.npz", bf16)
    assert nan["finite"] is False and nan["within_tolerance"] is False
    assert nan["max_abs_error"] is None
    with pytest.raises(ValueError, match="shape"):
        compare(reference[:1], reference, "ref.npz", fp32)


def test_a_stale_reference_is_refused(tmp_path):
    ids = np.arange(6).reshape(2, 3)
    path = tmp_path / "b2_s3.npz"
    save_reference(path, np.zeros((2, 3, 4), np.float32), ids, {"hidden": 4})
    assert load_reference(path, ids, {"hidden": 4}).shape == (2, 3, 4)
    with pytest.raises(ValueError, match="other token ids"):
        load_reference(path, ids + 1, {"hidden": 4})
    with pytest.raises(ValueError, match="another model config"):
        load_reference(path, ids, {"hidden": 8})


@pytest.mark.slow
@pytest.mark.parametrize("framework", [f for f in frameworks.REGISTERED if f != "pytorch"])
def test_other_frameworks_get_pytorchs_weights_without_torch(references, framework):
    """Every 2019 family with a class in the framework, in one process, by its default
    recipe: the same function as PyTorch, to fp32."""
    about = frameworks.get(framework)
    models = [m for m in MODELS_HERE if about.model_class(MODELS[m].family)]
    code = f"""
import sys
from pathlib import Path
from dlbench.frameworks import load_backend, load_ops
from dlbench.measure.correctness import compare, load_reference
from dlbench.catalogue.models import get_model
from dlbench.catalogue.recipes import optimization
from dlbench.scenarios.inference import prepare, token_ids
backend = load_ops(load_backend({framework!r}, "cpu", 2, 1), "inference")
eager = optimization("inference", {about.default_inference!r}, {framework!r})
root = Path({str(references)!r})
for name in {models!r}:
    spec = get_model(name)
    ids = token_ids(spec, {BATCH}, {SEQLEN}, 0)
    reference = load_reference(root / name / "b{BATCH}_s{SEQLEN}.npz", ids, dict(spec.params))
    model = backend.build(spec, 0, eager, root / name / "model.safetensors")
    output = backend.to_numpy(prepare(backend, model, backend.inputs(ids), eager)())
    check = compare(output, reference, "", eager.precision)
    print(name, check["max_rel_error"], check["within_tolerance"])
print("torch imported:", "torch" in sys.modules)
"""
    done = python("-c", code)  # not one_framework's process: it would mark torch absent
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.strip().splitlines()
    assert lines[-1] == "torch imported: False"
    assert len(lines) == len(models) + 1 and len(models) >= 4
    for line in lines[:-1]:
        name, error, within = line.split()
        assert within == "True" and float(error) < 1e-5, line


# -- every optimization in every framework, JSON validated -------------------------------


@pytest.mark.slow
@pytest.mark.parametrize(
    ("framework", "model", "optimization"),
    [
        ("pytorch", "tiny-bert", "eager"),
        ("pytorch", "tiny-bert", "eager-bf16"),
        ("pytorch", "tiny-bert", "eager-fp16"),
        ("pytorch", "tiny-distilgpt2", "torchscript"),  # GPT-2's mask: traced without it
        ("pytorch", "tiny-xlm", "torchscript"),  # XLM masks padding ids: there are none
        ("pytorch", "tiny-xlnet", "torchscript-bf16"),
        ("pytorch", "tiny-bert", "onednn"),
        ("pytorch", "tiny-distilgpt2", "onednn"),  # GPT-2's Conv1D layers too
        ("pytorch", "tiny-bert", "compile"),
        # compile-max-autotune: test_fairness compiles its recipe on two GEMMs (its
        # kernels, one graph); a tiny-bert cell of its own here took 50 s more. So no
        # transformer runs it in the suite: its frozen weights are `compile`'s (below).
        ("pytorch", "tiny-roberta", "compile-bf16"),
        ("tensorflow", "tiny-bert", "eager"),
        ("tensorflow", "tiny-xlm", "eager-bf16"),
        ("tensorflow", "tiny-bert", "eager-fp16"),
        ("tensorflow", "tiny-distilgpt2", "graph"),
        ("tensorflow", "tiny-roberta", "graph-bf16"),
        ("tensorflow", "tiny-xlnet", "xla"),
        ("tensorflow", "tiny-bert", "xla-bf16"),
        ("jax", "tiny-bert", "eager"),
        ("jax", "tiny-distilgpt2", "jit"),
        ("jax", "tiny-roberta", "jit-bf16"),
        ("jax", "tiny-bert", "jit-fp16"),
    ],
)
def test_optimization_runs_checks_and_validates(cells, framework, model, optimization):
    record = cells(framework, model, optimization)
    problem = expected_problem(optimization)
    if problem:  # this CPU has no native bf16/fp16: found at run time, with the reason
        assert (record["status"], record["reason"]) == ("unsupported", problem)
        return
    assert record["status"] == "ok", record["reason"]
    spec = recipes.optimization("inference", optimization, framework)
    assert record["optimization"]["recipe"] == spec.recipe.name
    assert record["optimization"]["precision"] == spec.precision.name
    timing = record["timing"]
    assert timing["compile_s"] >= 0 and timing["prepare_s"] >= 0
    if spec.recipe.name in ("torchscript",):
        assert timing["prepare_s"] > 0  # the trace
    if spec.recipe.name.startswith("compile") or spec.recipe.name in ("graph", "xla", "jit"):
        assert timing["cold_start_s"] > 10 * timing["median_ms"] / 1e3  # compiled at call 1
    check = record["correctness"]
    assert check["precision"] == spec.precision.name
    assert check["tolerance"] == spec.precision.tolerance
    assert check["within_tolerance"] is True, check
    if spec.precision.name == "fp32":
        assert check["max_rel_error"] < 1e-5


@pytest.mark.slow
@pytest.mark.parametrize("framework", frameworks.REGISTERED)
def test_a_planted_wrong_answer_is_flagged(cells, framework):
    record = cells(framework, "tiny-bert", "planted-error")
    assert record["status"] == "ok"
    check = record["correctness"]
    assert check["within_tolerance"] is False
    assert check["max_rel_error"] == pytest.approx(0.01, rel=1e-3)


# -- the summary and the report ----------------------------------------------------------


@pytest.mark.slow
def test_summary_and_report_show_speed_compile_time_correctness_and_reasons(tmp_path, cells):
    """The eager and planted-error cells are the ones the tests above checked (run once)."""
    env = {TEST_RECIPES_VARIABLE: "1"}
    runs = [("pytorch", "eager"), ("pytorch", "torchscript"), ("pytorch", "planted-error"),
            ("pytorch", "xla")]
    paths = []
    for framework, optimization in runs:
        cells(framework, "tiny-bert", optimization)
        paths.append(cell_file(cells.folder, framework, "tiny-bert", optimization))
    summary = tmp_path / "summary.parquet"
    done = python("-m", "dlbench", "aggregate", *map(str, paths), f"--parquet={summary}",
                  f"--csv={tmp_path / 'summary.csv'}", **env)
    assert done.returncode == 0, done.stderr

    import pandas as pd

    frame = pd.read_parquet(summary).set_index("optimization")
    assert frame.loc["xla", "status"] == "unsupported"
    assert frame.loc["xla", "reason"] == (
        "optimization 'xla' does not exist in PyTorch (only in TensorFlow)")
    assert bool(frame.loc["planted-error", "correctness_within_tolerance"]) is False
    assert bool(frame.loc["torchscript", "correctness_within_tolerance"]) is True
    assert frame.loc["torchscript", "prepare_s"] > 0
    assert frame.loc["torchscript", "compile_s"] >= 0

    html = tmp_path / "report.html"
    done = python("-m", "dlbench", "report", f"--notebook={REPORT}", f"--summary={summary}",
                  f"--executed={tmp_path / 'report.ipynb'}", f"--out={html}", timeout=600,
                  **env)
    assert done.returncode == 0, done.stderr[-3000:]
    text = html.read_text()
    for heading in ("Speed-up over eager", "Speed, compile time and correctness per optimization",
                    "Compile, trace and conversion time", "Correctness"):
        assert heading in text
    # Another framework's optimization: counted once as not applicable, not as a failure.
    assert ("cells of a framework with an optimization that only other frameworks have "
            "(PyTorch xla: 1)") in text
    assert "1 cells computed a wrong answer" in text
    assert "pytorch_tiny-bert_cpu_b2_s16_planted-error" in text
    assert "✗ 1 of 1 outside tolerance" in text and "✓ all 1 within tolerance" in text
    assert "Traceback" not in text
