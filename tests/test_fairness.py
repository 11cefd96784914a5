"""Fair comparisons, in the real frameworks on the tiny models: the same arithmetic in both
(float32 without TF32 unless `tf32` is asked for), the same attention work in every
PyTorch recipe, what each framework keeps in float32 under mixed precision, torch.compile's
graphs and TensorFlow's memory growth on a GPU. What every cell records of its arithmetic,
attention, memory by phase and libraries: tests/test_cli.py, from the records it shares."""

import json
import re
import subprocess
import sys

import pytest

from dlbench.catalogue.precisions import PRECISIONS
from dlbench.catalogue.recipes import optimizations
from dlbench.scenarios.inference import cell as Cell
from tests.conftest import one_framework, tool_env


def run_python(framework: str, code: str, timeout: int = 600,
               **env: str) -> subprocess.CompletedProcess:
    """Run code in a fresh interpreter of `framework` alone, which must succeed."""
    done = subprocess.run([sys.executable, "-c", one_framework(framework, code)],
                          capture_output=True, text=True, timeout=timeout,
                          env=tool_env(**env))
    assert done.returncode == 0, done.stderr[-3000:]
    return done


def python(framework: str, code: str, timeout: int = 600, **env: str) -> dict:
    """Run code in a fresh interpreter of `framework` alone; the JSON it prints last."""
    printed = run_python(framework, code, timeout, **env).stdout
    return json.loads(printed.strip().splitlines()[-1])


# -- the same arithmetic -------------------------------------------------------------------


def test_tf32_is_a_precision_of_both_frameworks_on_gpus_only():
    for recipe in ("eager", "compile", "graph", "xla"):
        assert optimizations("inference")[f"{recipe}-tf32"].precision is PRECISIONS["tf32"]
    tolerances = [PRECISIONS[p].tolerance for p in ("fp32", "tf32", "fp16")]
    assert tolerances == sorted(tolerances)  # between float32's and float16's
    reason = Cell("tensorflow", "tiny-bert", "cpu", 1, 8, "xla-tf32").unsupported_reason()
    assert reason.startswith("optimization 'xla-tf32': TF32 is a tensor-core format")
    assert Cell("pytorch", "tiny-bert", "gpu", 1, 8, "eager-tf32").unsupported_reason() is None


BACKEND = """
import json
from dlbench.frameworks import load_backend, load_ops
from dlbench.catalogue.models import get_model
from dlbench.catalogue.recipes import optimizations; OPTIMIZATIONS = optimizations("inference")
from dlbench.scenarios.inference import token_ids
backend = load_backend({framework!r}, "cpu", 2, 1)
found = {{p: backend.set_arithmetic(p) for p in ("tf32", "bf16", "fp32")}}
ops = load_ops(backend, "inference")
spec, bf16 = get_model("tiny-bert"), OPTIMIZATIONS["eager-bf16"]
model = ops.build(spec, 0, bf16)
found["ops"] = ops.precision_ops(model, ops.inputs(token_ids(spec, 1, 8, 0)), bf16)
print(json.dumps(found))
"""


@pytest.mark.parametrize(("framework", "matmul", "layer_norm"), [
    ("pytorch", {"aten.linear", "aten.addmm", "aten.mm", "aten.bmm"},
     {"aten.layer_norm", "aten.native_layer_norm"}),
    ("tensorflow", {"MatMul", "BatchMatMulV2"}, {"Rsqrt", "Mean", "FusedBatchNormV3"}),
    ("jax", {"dot_general"}, {"rsqrt", "reduce_sum"}),  # Flax's LayerNorm statistics
])
def test_float32_is_float32_and_mixed_precision_names_its_float32_ops(framework, matmul,
                                                                      layer_norm):
    """fp32 (and bf16/fp16) switch TF32 off, in TensorFlow too (it allows TF32 by default);
    tf32 switches it on. Under bf16 the matrix products compute in bfloat16 and each
    framework keeps its own choice of ops in float32 (run on this CPU in emulation)."""
    found = python(framework, BACKEND.format(framework=framework))
    assert found["tf32"]["tf32"] is True
    assert found["fp32"]["tf32"] is False and found["bf16"]["tf32"] is False
    assert not any(v in ("tf32", True) for v in found["fp32"]["switches"].values())
    ops = found["ops"]
    assert matmul & set(ops["reduced_ops"]), ops
    assert layer_norm & set(ops["float32_ops"]), ops
    assert not set(ops["float32_ops"]) & {"Cast", "aten._to_copy", "aten.view",
                                          "convert_element_type"}


# -- JAX's thread pool: XLA:CPU has no API for it; the backend bounds it (PJRT_NPROC) -------

JAX_THREADS = """
import glob, json
from dlbench.frameworks import load_backend
backend = load_backend("jax", "cpu", {threads}, 1)
import jax.numpy as jnp
x = jnp.ones((512, 512))
backend.hold(x @ x); backend.synchronize()
pool = sum("XLAEigen" in open(f).read() for f in glob.glob("/proc/self/task/*/comm"))
print(json.dumps({{"pool": pool, "recorded": backend.thread_settings()}}))
"""


@pytest.mark.parametrize("threads", [1, 3])
def test_jax_bounds_its_cpu_pool_to_the_cells_threads(threads):
    found = python("jax", JAX_THREADS.format(threads=threads))
    assert found == {"pool": threads, "recorded": {"intra_op": threads, "inter_op": 1}}


# -- TensorFlow's memory growth on a GPU (no GPU here: the device list is planted) ------------

MEMORY_GROWTH = """
import json
import tensorflow as tf
grown = {}
gpu = tf.config.PhysicalDevice("/physical_device:GPU:0", "GPU")
tf.config.list_physical_devices = lambda kind=None: [gpu] if kind == "GPU" else []
tf.config.experimental.set_memory_growth = lambda device, on: grown.__setitem__(device.name, on)
tf.config.experimental.get_memory_growth = lambda device: grown.get(device.name, False)
from dlbench.frameworks import load_backend
backend = load_backend("tensorflow", "gpu", 2, 1)
print(json.dumps({"grown": grown, "recorded": backend.memory_growth}))
"""


def test_tensorflow_grows_its_gpu_memory_instead_of_reserving_the_card():
    found = python("tensorflow", MEMORY_GROWTH)
    assert found == {"grown": {"/physical_device:GPU:0": True}, "recorded": True}


# -- the same attention work in every PyTorch recipe ---------------------------------------

ATTENTION = """
import json
import torch
from torch.overrides import TorchFunctionMode
from dlbench.frameworks import load_backend, load_ops
from dlbench.catalogue.models import get_model
from dlbench.catalogue.recipes import optimizations; OPTIMIZATIONS = optimizations("inference")
from dlbench.scenarios.inference import prepare, token_ids

SDPA = torch.nn.functional.scaled_dot_product_attention
class Masks(TorchFunctionMode):
    def __init__(self):
        super().__init__()
        self.masks = []  # per SDPA call: was a mask passed?
    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {{}}
        if func is SDPA:
            mask = kwargs.get("attn_mask", args[3] if len(args) > 3 else None)
            self.masks.append(mask is not None)
        return func(*args, **kwargs)

ops = load_ops(load_backend("pytorch", "cpu", 1, 1), "inference")
found = {{}}
for attention, models in {settings!r}.items():
    found[attention] = {{}}
    for name in models:
        spec = get_model(name)
        for recipe in {recipes!r}[attention]:
            optimization = OPTIMIZATIONS[recipe]
            try:  # as the inference scenario asks: the setting's, or the recipe's own
                model = ops.build(spec, 0, optimization,
                                  attention=optimization.recipe.attention_of(attention))
            except TypeError:  # a dlbench without the attention setting
                model = ops.build(spec, 0, optimization)
            inputs = ops.inputs(token_ids(spec, 2, 16, 0))
            if hasattr(ops, "same_attention_work"):  # as the inference scenario does
                ops.same_attention_work(model, inputs)
            spy = Masks()
            with torch.inference_mode():
                if recipe == "compile":  # dynamo's graph of the recipe's model and inputs
                    explained = torch._dynamo.explain(model)(**inputs)
                    code = "\\n".join(g.code for g in explained.graphs)
                    calls = [l for l in code.splitlines()
                             if "scaled_dot_product_attention" in l]
                    masks = ["attn_mask = None" not in l for l in calls]
                    found[attention][f"{{name}} compile graphs"] = explained.graph_count
                else:  # the trace happens in prepare(); eager runs here
                    with spy:
                        step = prepare(ops, model, inputs, optimization)
                        if recipe.startswith("eager"):
                            step()
                    masks = spy.masks
            found[attention][f"{{name}} {{recipe}}"] = masks
            ops.release()
print(json.dumps(found))
"""
MASKED_MODELS = ["tiny-bert", "tiny-gpt2", "tiny-distilbert", "tiny-roberta"]


@pytest.fixture(scope="module")
def attention_work() -> dict:
    """Per attention setting, the SDPA calls of each recipe (and compile's graphs): both
    settings in one process, which pays torch's and transformers' imports once."""
    every = ("eager", "torchscript", "compile")
    return python("pytorch", ATTENTION.format(
        settings={"sdpa": MASKED_MODELS, "eager": ["tiny-bert", "tiny-gpt2"]},
        recipes={"sdpa": every, "eager": every + ("eager-sdpa", "torchscript-sdpa")}))


@pytest.mark.slow
def test_every_pytorch_recipe_does_the_same_attention_work(attention_work):
    """transformers' SDPA path skips an all-ones mask eagerly; trace and compile took the
    other branch and applied it (aten::ones, masked_fill feeding SDPA). With the harness's
    policy every recipe calls SDPA without a mask."""
    found = attention_work["sdpa"]
    for name in MASKED_MODELS:
        for recipe in ("eager", "torchscript", "compile"):
            masks = found[f"{name} {recipe}"]
            assert masks and not any(masks), (name, recipe, masks)
        assert found[f"{name} compile graphs"] == 1


@pytest.mark.slow
def test_eager_attention_applies_the_mask_in_every_recipe_without_sdpa(attention_work):
    """measurement.attention: eager — the explicit algorithm of the TensorFlow classes — in
    every recipe but PyTorch's -sdpa ones, which call SDPA (without a mask) whatever the
    setting says."""
    found = attention_work["eager"]
    explicit = [key for key in found if not key.endswith(("graphs", "-sdpa"))]
    assert explicit and all(found[key] == [] for key in explicit)
    for name in ("tiny-bert", "tiny-gpt2"):
        for recipe in ("eager-sdpa", "torchscript-sdpa"):
            masks = found[f"{name} {recipe}"]
            assert masks and not any(masks), (name, recipe, masks)


# -- torch.compile: Inductor's CPU inference settings, graphs and graph breaks -------------

KERNELS = """
import json, re
import torch
from torch._inductor.utils import run_and_get_code
from transformers.modeling_outputs import BaseModelOutput
from dlbench.frameworks import load_backend, load_ops
from dlbench.catalogue.recipes import optimizations; OPTIMIZATIONS = optimizations("inference")

class Layers(torch.nn.Module):  # two GEMMs: tiny-bert's dozen took 30 s more to tune
    def __init__(self):
        super().__init__()
        self.up, self.down = torch.nn.Linear(64, 256), torch.nn.Linear(256, 64)

    def forward(self, x):
        return BaseModelOutput(last_hidden_state=self.down(torch.relu(self.up(x))))

ops = load_ops(load_backend("pytorch", "cpu", 2, 1), "inference")
found = {}
for name in ("compile", "compile-max-autotune"):
    torch.manual_seed(0)
    step = ops.recipes[name](Layers().eval(), {"x": torch.randn(2, 16, 64)}, OPTIMIZATIONS[name])
    _, code = run_and_get_code(step)
    found[name] = len(re.findall(r"micro_gemm", "\\n".join(code)))
    found[name + " stats"] = ops.compilation()
    ops.release()
print(json.dumps(found))
"""


@pytest.mark.slow
def test_max_autotune_on_the_cpu_tunes_among_its_own_gemm_kernels():
    """Inductor's CPU GEMM templates need frozen weights: without freezing, max-autotune
    chose among nothing but the library's matrix products and compiled as `compile` does.
    Every GEMM it tuned had a template among its choices (Inductor's AUTOTUNE lines);
    which choice won is timed, and beside another test it was once the library's each
    time, so which one won is not the check. `compile` tunes nothing and has no template."""
    done = run_python("pytorch", KERNELS)  # its stderr holds Inductor's AUTOTUNE lines
    found = json.loads(done.stdout.strip().splitlines()[-1])
    tuned = re.split(r"^AUTOTUNE ", done.stderr, flags=re.MULTILINE)[1:]
    assert len(tuned) == 2, done.stderr[-3000:]  # the model's two GEMMs
    for gemm in tuned:  # its choices, until the line that says how long tuning took
        choices = gemm.split("AUTOTUNE benchmarking takes")[0]
        # timed, not failed (inf ms)
        assert re.search(r"^  cpp_CppMicroGemm\w+ \d+\.\d+ ms", choices, re.MULTILINE), \
            gemm[:600]
    assert found["compile"] == 0
    for name in ("compile", "compile-max-autotune"):
        stats = found[name + " stats"]
        assert (stats["graphs"], stats["graph_breaks"], stats["recompiles"]) == (1, 0, 0)


GRAPH_BREAK = """
import json
import torch
from transformers.modeling_outputs import BaseModelOutput
from dlbench.frameworks import load_backend, load_ops
from dlbench.catalogue.recipes import optimizations; OPTIMIZATIONS = optimizations("inference")

class Split(torch.nn.Module):  # a model that cannot compile to one graph
    def forward(self, x):
        y = torch.relu(x)
        print("a graph break")
        return BaseModelOutput(last_hidden_state=y * 2)

ops = load_ops(load_backend("pytorch", "cpu", 1, 1), "inference")
step = ops.recipes["compile"](Split(), {"x": torch.ones(4)}, OPTIMIZATIONS["compile"])
step()
step()
print(json.dumps(ops.compilation()))
"""


def _inner_products(tmp_path, model: str, optimization: str) -> int:
    """How many oneDNN inner products (its linear layer's primitive) a cell executed, as
    ONEDNN_VERBOSE lists them."""
    done = subprocess.run(
        [sys.executable, "-m", "dlbench", "run", "--framework=pytorch", f"--model={model}",
         "--device=cpu", "--batch", "1", "--seqlen", "8", f"--optimization={optimization}",
         "--min-duration-s=0.05", "--min-iterations=3", "--target-ci=0",
         f"--out={tmp_path / optimization}.json"],
        capture_output=True, text=True, timeout=300, env=tool_env(ONEDNN_VERBOSE="1"))
    assert done.returncode == 0, done.stderr[-3000:]
    record = json.loads((tmp_path / f"{optimization}.json").read_text())
    assert record["status"] == "ok", record["reason"]
    return (done.stdout + done.stderr).count("exec,cpu,inner_product")


@pytest.mark.slow
def test_the_onednn_recipe_runs_the_linear_layers_in_onednn(tmp_path):
    """nn.Linear calls MKL's sgemm in PyTorch's x86 builds; `onednn` runs every linear
    layer as oneDNN's inner product instead — BERT's nn.Linear and GPT-2's Conv1D alike —
    and eager runs none (its answer is checked in tests/test_optimizations.py)."""
    assert _inner_products(tmp_path / "bert", "tiny-bert", "eager") == 0
    assert _inner_products(tmp_path / "bert", "tiny-bert", "onednn") > 0
    assert _inner_products(tmp_path / "gpt2", "tiny-gpt2", "onednn") > 0


@pytest.mark.slow
def test_a_model_that_did_not_compile_to_one_graph_is_counted_and_flagged():
    from dlbench.measure.flags import flags

    stats = python("pytorch", GRAPH_BREAK)
    assert stats["graph_breaks"] >= 1 and stats["graphs"] >= 2
    assert "print" in " ".join(stats["break_reasons"])
    result = flags(0.01, [], compilation=stats)
    assert result["not_one_graph"] and result["reasons"][0].startswith("not one graph")
