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
MODEL = "tiny-bert"  # its other families: test_optimizations.py
# The export's example shape (export.py), and shapes beside it: the graph is dynamic.
SHAPES = [(BATCH, SEQLEN), (1, 16), (1, 40)]
FAST = ["--warmup-iterations=1", "--min-duration-s=0.05", "--min-iterations=3"]


@pytest.fixture(scope="module")
def references(tmp_path_factory):
    root = tmp_path_factory.mktemp("reference")
    code = f"""
from pathlib import Path
from dlbench.reference import write_output, write_weights
folder = Path({str(root / MODEL)!r})
write_weights({MODEL!r}, 0, folder / "model.safetensors", threads=2)
for batch, seqlen in {SHAPES!r}:
    write_output({MODEL!r}, batch, seqlen, 0, folder / "model.safetensors",
                 folder / f"b{{batch}}_s{{seqlen}}.npz", threads=2)
"""
    done = python("-c", code)
    assert done.returncode == 0, done.stderr[-3000:]
    return root / MODEL


def run(out, references, optimization: str, *sizes: str) -> list[dict]:
    """`dlbench run` of ONNX Runtime's cells of these sizes (one cell: --out a file; a group:
    --out-dir a folder), checked against the references: their records."""
    done = python("-m", "dlbench", "run", *FAST, "--framework=onnxruntime", f"--model={MODEL}",
                  "--attention=eager",  # the workflow's default
                  "--device=cpu", *(sizes or (f"--batch={BATCH}", f"--seqlen={SEQLEN}")),
                  f"--optimization={optimization}",
                  f"--weights={references / 'model.safetensors'}",
                  *((f"--reference-dir={references}", f"--out-dir={out}") if sizes else
                    (f"--reference={references / f'b{BATCH}_s{SEQLEN}.npz'}", f"--out={out}")))
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    records = [json.loads(path.read_text())
               for path in (sorted(out.glob("*.json")) if sizes else [out])]
    for record in records:
        result.validate(record)
    return records


def test_every_level_runs_the_model_exported_once_and_gives_pytorchs_answer(
        tmp_path, references):
    """The first cell of a model exports it (beside the weights, its time recorded); the
    next ones, at the other levels, reuse the file; every level's output is PyTorch eager
    fp32's on the same weights, to fp32's tolerance."""
    exported = references / "model-eager.onnx"
    assert not exported.exists()
    records = [run(tmp_path / f"{level}.json", references, level)[0]
               for level in ("ort-disable", "ort-basic", "ort-extended", "ort-all")]
    assert exported.is_file()
    assert [r["details"]["onnx_reused"] for r in records] == [False, True, True, True]
    assert len({r["details"]["onnx_export_s"] for r in records}) == 1  # one export
    for record in records:
        assert record["status"] == "ok", record.get("reason")
        assert record["params"]["framework"] == "onnxruntime"
        assert record["threads"]["intra_op"] == 2 and record["threads"]["inter_op"] == 1
        assert record["timing"]["prepare_s"] > 0  # the session, made from the file
        assert record["attention"]["implementation"] == "eager"
        check = record["correctness"]
        assert check["within_tolerance"] is True and check["max_rel_error"] < 1e-5, check


def test_a_group_of_other_shapes_shares_the_export_and_gives_pytorchs_answer(
        tmp_path, references):
    """One process, two cells of shapes other than the export's example: both right, and
    the second, which reuses the first's model, records the export too."""
    records = run(tmp_path / "group", references, "ort-all", "--batch", "1", "--seqlen",
                  "16", "40")
    assert [r["params"]["seqlen"] for r in records] == [16, 40]
    assert [r["process"]["model_reused"] for r in records] == [False, True]
    for record in records:
        assert record["status"] == "ok", record.get("reason")
        assert record["correctness"]["max_rel_error"] < 1e-5, record["correctness"]
        assert record["details"]["onnx_export_s"] > 0
    assert records[1]["details"]["onnx_reused"] is True


def test_weights_made_again_are_exported_again(tmp_path, references):
    run(tmp_path / "before.json", references, "ort-basic")  # exported, if not already
    weights = references / "model.safetensors"
    stat = weights.stat()
    os.utime(weights, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))
    again = run(tmp_path / "after.json", references, "ort-basic")[0]
    assert again["details"]["onnx_reused"] is False
    assert again["status"] == "ok" and again["correctness"]["within_tolerance"] is True


def test_float16_runs_where_the_cpu_and_the_provider_have_it_and_bfloat16_says_why(
        tmp_path, references):
    """-fp16: the graph converted to float16, right to fp16's tolerance, its operators
    listed by type; where the CPU has no float16 units, unsupported with the reason. -bf16:
    unsupported, the CPU execution provider's own words (or the CPU's lack)."""
    backend = OnnxRuntimeBackend("cpu", 2, 1)
    half = run(tmp_path / "fp16.json", references, "ort-all-fp16")[0]
    if backend.precision_problem("fp16"):
        assert (half["status"], half["reason"]) == ("unsupported",
                                                    backend.precision_problem("fp16"))
    else:
        assert half["status"] == "ok", half.get("reason")
        assert half["correctness"]["within_tolerance"] is True, half["correctness"]
        assert half["correctness"]["max_rel_error"] > 1e-6  # not the float32 graph
        assert "MatMul" in half["mixed_precision"]["reduced_ops"]
    brain = run(tmp_path / "bf16.json", references, "ort-all-bf16")[0]
    assert brain["status"] == "unsupported"
    assert brain["reason"] == backend.precision_problem("bf16")
    assert ("cannot load a bfloat16 MatMul" in brain["reason"]
            or "no native bf16" in brain["reason"])


def test_an_eager_recipe_a_gpu_or_xlnet_is_not_there_with_the_reason():
    """(Its other scenarios: tests/test_matrix.py.)"""
    assert inference_cell("onnxruntime", "tiny-bert", "cpu", 1, 8, "eager"
                          ).unsupported_reason().startswith(
        "optimization 'eager' does not exist in ONNX Runtime")
    assert "GPU execution provider" in OnnxRuntimeBackend("gpu", 2, 1).device_problem()
    assert inference_cell("onnxruntime", "tiny-xlnet", "cpu", 1, 8, "ort-all"
                          ).unsupported_reason().startswith(
        "tiny-xlnet (xlnet) in ONNX Runtime: torch 2.13's ONNX exporter fails")
