"""ONNX Runtime, the inference-only framework: the model exported once from the shared
PyTorch weights and reused, each graph optimization level run and checked against PyTorch
eager fp32, reduced precisions refused with the reason, and its cells of other scenarios
not applicable by design."""

import json
import os

import pytest

from dlbench.frameworks.onnxruntime.backend import OnnxRuntimeBackend
from dlbench.records import result
from dlbench.scenarios.inference import cell as inference_cell
from tests.test_optimizations import BATCH, SEQLEN, python

pytestmark = pytest.mark.slow
MODELS = ["tiny-bert"]  # its other families: test_optimizations.py
FAST = ["--warmup-iterations=1", "--min-duration-s=0.05", "--min-iterations=3"]


@pytest.fixture(scope="module")
def references(tmp_path_factory):
    root = tmp_path_factory.mktemp("reference")
    code = f"""
from pathlib import Path
from dlbench.reference import write_output, write_weights
root = Path({str(root)!r})
for model in {MODELS!r}:
    weights = root / model / "model.safetensors"
    write_weights(model, 0, weights, threads=2)
    write_output(model, {BATCH}, {SEQLEN}, 0, weights, root / model / "b{BATCH}_s{SEQLEN}.npz",
                 threads=2)
"""
    done = python("-c", code)
    assert done.returncode == 0, done.stderr[-3000:]
    return root


def run(tmp_path, references, model: str, optimization: str, batch: int = BATCH) -> dict:
    out = tmp_path / f"{model}_{optimization}_{batch}.json"
    folder = references / model
    reference = ([f"--reference={folder / f'b{batch}_s{SEQLEN}.npz'}"]
                 if batch == BATCH else [])
    done = python("-m", "dlbench", "run", *FAST, "--framework=onnxruntime", f"--model={model}",
                  "--attention=eager",  # the workflow's default
                  "--device=cpu", f"--batch={batch}", f"--seqlen={SEQLEN}",
                  f"--optimization={optimization}",
                  f"--weights={folder / 'model.safetensors'}", *reference, f"--out={out}")
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    record = json.loads(out.read_text())
    result.validate(record)
    return record


def test_every_level_runs_the_model_exported_once_and_gives_pytorchs_answer(
        tmp_path, references):
    """The first cell of a model exports it (beside the weights, its time recorded); the
    next ones, at another level or batch, reuse the file; every level's output is PyTorch
    eager fp32's on the same weights, to fp32's tolerance."""
    exported = references / "tiny-bert" / "model-eager.onnx"
    assert not exported.exists()
    records = [run(tmp_path, references, "tiny-bert", level)
               for level in ("ort-disable", "ort-basic", "ort-extended", "ort-all")]
    records.append(run(tmp_path, references, "tiny-bert", "ort-all", batch=1))  # dynamic
    assert exported.is_file()
    assert [r["details"]["onnx_reused"] for r in records] == [False, True, True, True, True]
    assert records[0]["details"]["onnx_export_s"] > 0
    for record in records:
        assert record["status"] == "ok", record.get("reason")
        assert record["params"]["framework"] == "onnxruntime"
        assert record["threads"]["intra_op"] == 2
        assert record["timing"]["compile_s"] >= 0 and record["timing"]["prepare_s"] > 0
        assert record["attention"]["implementation"] == "eager"
    for record in records[:4]:
        check = record["correctness"]
        assert check["within_tolerance"] is True and check["max_rel_error"] < 1e-5, check
    assert records[4]["throughput"]["samples_per_s"] > 0


def test_weights_made_again_are_exported_again(tmp_path, references):
    """(After the first test, whose cells exported tiny-bert.)"""
    weights = references / "tiny-bert" / "model.safetensors"
    stat = weights.stat()
    os.utime(weights, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))
    again = run(tmp_path, references, "tiny-bert", "ort-basic")
    assert again["details"]["onnx_reused"] is False
    assert again["status"] == "ok" and again["correctness"]["within_tolerance"] is True


def test_a_reduced_precision_is_unsupported_with_the_reason(tmp_path, references):
    record = run(tmp_path, references, "tiny-bert", "ort-all-bf16")
    assert record["status"] == "unsupported"
    assert record["reason"] == OnnxRuntimeBackend("cpu", 2, 1).precision_problem("bf16")
    assert ("cannot load a bfloat16 MatMul" in record["reason"]
            or "no native bf16" in record["reason"])


def test_an_eager_recipe_or_a_gpu_is_not_there_with_the_reason():
    """(Its other scenarios: tests/test_matrix.py.)"""
    assert inference_cell("onnxruntime", "tiny-bert", "cpu", 1, 8, "eager"
                          ).unsupported_reason().startswith(
        "optimization 'eager' does not exist in ONNX Runtime")
    assert "GPU execution provider" in OnnxRuntimeBackend("gpu", 2, 1).device_problem()
