"""What one cell changes in its process is undone before the next cell of a group: the
Keras mixed-precision policy, environment variables (the Inductor cache), and nothing
global is touched when dlbench is imported."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from dlbench.catalogue import frameworks
from dlbench.frameworks.onnxruntime import export
from dlbench.run import peak
from tests.conftest import tool_env


def python(code: str) -> str:
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=300, env=tool_env())
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout.strip().splitlines()[-1]


def test_tensorflow_cell_leaves_the_float32_policy():
    code = """
from dlbench.frameworks import load_backend, load_ops
from dlbench.catalogue.models import get_model
from dlbench.catalogue.recipes import optimizations; OPTIMIZATIONS = optimizations("inference")
import tensorflow as tf
ops = load_ops(load_backend("tensorflow", "cpu", 1, 1), "inference")
ops.build(get_model("tiny-bert"), 0, OPTIMIZATIONS["eager-fp16"])
during = tf.keras.mixed_precision.global_policy().name
ops.release()
print(during, tf.keras.mixed_precision.global_policy().name)
"""
    assert python(code) == "mixed_float16 float32"


def test_pytorch_compile_cell_restores_the_environment():
    """The compile recipe sets a fresh Inductor cache folder in the environment; release()
    removes the folder and puts the environment back. The recipe compiles at the step's
    first call, which this test never makes: a small module serves as well as a model."""
    code = """
import os
import torch
from dlbench.frameworks import load_backend, load_ops
from dlbench.catalogue.recipes import optimizations; OPTIMIZATIONS = optimizations("inference")
from dlbench.scenarios.inference import prepare
os.environ["TRITON_CACHE_DIR"] = "/mine"
ops = load_ops(load_backend("pytorch", "cpu", 1, 1), "inference")
prepare(ops, torch.nn.ReLU(), {"input": torch.ones(4)}, OPTIMIZATIONS["compile"])
during = os.environ["TORCHINDUCTOR_CACHE_DIR"]
made = os.path.isdir(during)
ops.release()
# (Torch may set its own default afterwards: not the cell's deleted folder.)
print(made, os.path.isdir(during), os.environ.get("TORCHINDUCTOR_CACHE_DIR") == during,
      os.environ["TRITON_CACHE_DIR"])
"""
    assert python(code) == "True False False /mine"


@pytest.mark.slow  # a framework process or more each: 11-21 s, the full suite's
def test_inductors_machine_work_is_made_once_per_machine(tmp_path):
    """What Inductor makes once per machine and keeps in its default cache goes to folders
    kept in the temporary folder, not to a compile cell's fresh cache nor to its process's
    own temporary folder: the probe of the vector instruction sets (a program compiled per
    set, 7-10 s on 2 cores) and the precompiled header of its C++ kernels (about 5 s). The
    cell's cache holds only its own kernels, and a second process finds both and compiles
    neither again. (The probe in the machine's folder, as the suite's other compile cells
    use it: a private one cost this test 16 s more; the header in the test's own, empty at
    first, which no other test's compilation adds to meanwhile.)"""
    code = """
import json, os
from pathlib import Path
from dlbench.files import scratch
process_folder = scratch.private()
scratch.use(process_folder)  # as a measuring process's (dlbench.run.supervisor)
import torch
from dlbench.frameworks.pytorch import backend
machines = backend.precompiled_header_folder()
headers = Path(os.environ["TEST_HEADERS"])
backend.precompiled_header_folder = lambda: headers
def built(folder, pattern):
    return {p.name: p.stat().st_mtime_ns for p in folder.rglob(pattern)}
caches = backend.InductorCaches()
caches.fresh()
torch.compile(torch.nn.ReLU())(-torch.ones(4))  # compiles a kernel into the cell's cache
own = Path(os.environ["TORCHINDUCTOR_CACHE_DIR"])
print(json.dumps({"probes": built(backend.isa_probe_folder(), "*.so"),
                  "own": sorted(built(own, "*.so")),
                  "headers": built(headers, "*.gch"),
                  "own_headers": sorted(built(own, "*.gch") | built(process_folder, "*.gch")),
                  "machines": str(machines), "process": str(process_folder)}))
caches.release()
scratch.remove(process_folder)
"""
    env = tool_env(TEST_HEADERS=str(tmp_path / "headers"))
    runs = [subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           timeout=300, env=env) for _ in range(2)]
    for run in runs:
        assert run.returncode == 0, run.stderr[-3000:]
    first, second = (json.loads(run.stdout.strip().splitlines()[-1]) for run in runs)
    assert first["probes"]  # AVX2 at least, on any x86 machine this runs on
    assert first["headers"]  # the kernels' header, for this compiler and its flags
    # The same programs and header, not compiled again.
    assert (second["probes"], second["headers"]) == (first["probes"], first["headers"])
    for run in (first, second):
        assert run["own"]  # the cell compiled its kernel …
        assert not set(run["own"]) & set(run["probes"])  # … and no probe of its own …
        assert not run["own_headers"]  # … nor a header, in its process's folder either
        assert not run["machines"].startswith(run["process"])  # the machine's folder


def test_dlbench_never_flips_the_umask():
    """Reading the umask by setting it changes it for every thread meanwhile: dlbench reads
    it from /proc instead, when it writes a file."""
    code = """
import os
calls, real = [], os.umask
os.umask = lambda mask: calls.append(mask) or real(mask)
os.umask(0o027)
import dlbench.records.result, dlbench.cli, dlbench.records.record
from dlbench.files.atomic import default_file_mode, write_json_atomic
write_json_atomic("/tmp/dlbench-umask-test.json", {})
print(calls, oct(default_file_mode()), oct(os.stat("/tmp/dlbench-umask-test.json").st_mode))
"""
    assert python(code) == "[23] 0o640 0o100640"


@pytest.mark.parametrize("framework", frameworks.REGISTERED)
def test_a_cell_imports_no_other_framework_nor_unused_libraries(tmp_path, framework):
    """transformers imports every framework it finds, TensorFlow Lite imports JAX, and both
    import scikit-learn and SciPy: seconds of a cell's start-up on 2 cores. A cell imports
    its own framework and none of those (frameworks.unused_imports), and still runs."""
    out = tmp_path / "cell.json"
    done = subprocess.run(
        [sys.executable, "-m", "dlbench", "run", f"--framework={framework}",
         "--model=tiny-bert", "--device=cpu", "--batch=1", "--seqlen=8",
         f"--optimization={frameworks.get(framework).default_inference}",
         "--warmup-iterations=1", "--min-duration-s=0.01",
         "--min-iterations=2", "--target-ci=0", f"--out={out}"],
        capture_output=True, text=True, timeout=300,
        env=tool_env(PYTHONPROFILEIMPORTTIME="1"))
    assert done.returncode == 0 and '"status": "ok"' in out.read_text(), done.stderr[-3000:]
    # The framework's imports: in the job, or in the warm parent that forked it (its log).
    parent = json.loads(out.read_text())["process"]["warm_parent"]
    profile = done.stderr + (Path(parent["log"]).read_text() if parent else "")
    imported = _imports_of_one_framework(framework, profile)
    # transformers builds the model in the cell, but in ONNX Runtime's, which runs the model
    # exported by a PyTorch process of its own (no torch in the cell either).
    assert ("transformers" in imported) == (framework != "onnxruntime")


def _imports_of_one_framework(framework: str, profile: str, keep=()) -> set[str]:
    """The packages a process imported (PYTHONPROFILEIMPORTTIME's lines), checked to hold
    `framework` and none of its unused imports but those it keeps."""
    imported = _imported_packages(profile)
    assert frameworks.packages(framework) & imported
    unused = frameworks.unused_imports(framework) - set(keep)
    assert not imported & unused, imported & unused
    return imported


def _imported_packages(profile: str) -> set[str]:
    """The top-level packages of which a module took 1 ms or more to import, from
    PYTHONPROFILEIMPORTTIME's lines ("import time: self | cumulative | name"): an import
    refused by a package marked absent leaves a line too, of microseconds."""
    packages = set()
    for line in profile.splitlines():
        if line.startswith("import time:"):
            _, cumulative, name = line.split("|")
            if cumulative.strip().isdigit() and int(cumulative) >= 1000:
                packages.add(name.strip().split(".")[0])
    return packages


def _peak_job(framework: str, out) -> list[str]:
    library = next(key for key, lib in peak.LIBRARIES.items()
                   if lib.framework == framework and lib.default)
    # No wait for a quiet machine, one attempt: the imports are under test, not the figure.
    return ["-m", "dlbench", "peak", "--device=cpu", "--precision=fp32", "--threads=2",
            f"--library={library}", "--seconds=0.05", "--size=64", "--quiet-wait-s=0",
            "--attempts=1", f"--out={out}"]


def _reference_job(job: str, weights, out=None) -> list[str]:
    """A reference rule's command: the weights (written to `weights`), or an output or a
    generation from them (to `out`)."""
    if job == "weights":
        return ["-m", "dlbench.reference", "weights", "--model=tiny-gpt2", "--seed=0",
                "--threads=2", f"--out={weights}"]
    sizes = ["--seqlen=4", "--new-tokens=2"] if job == "generation" else ["--seqlen=8"]
    return ["-m", "dlbench.reference", job, "--model=tiny-gpt2", "--batch=1", *sizes,
            f"--weights={weights}", f"--out={out}"]


@pytest.fixture(scope="module")
def tiny_gpt2_weights(tmp_path_factory) -> tuple[Path, str]:
    """The reference weights of tiny-gpt2 as the workflow's weights job makes them, and that
    job's import profile: made once for the weights job's own check and for the output and
    generation jobs that start from them (a process importing PyTorch and transformers:
    seconds of CPU each)."""
    weights = tmp_path_factory.mktemp("weights") / "model.safetensors"
    made = subprocess.run([sys.executable, *_reference_job("weights", weights)],
                          capture_output=True, text=True, timeout=300,
                          env=tool_env(PYTHONPROFILEIMPORTTIME="1"))
    assert made.returncode == 0 and weights.exists(), made.stderr[-3000:]
    return weights, made.stderr


@pytest.mark.parametrize("job,framework", [
    *((job, frameworks.REFERENCE_FRAMEWORK) for job in ("weights", "output", "generation")),
    *(("peak", framework) for framework in frameworks.REGISTERED)])
def test_the_workflows_other_jobs_of_one_framework_import_nothing_unused(request, tmp_path,
                                                                         job, framework):
    """The reference weights, output and generation (PyTorch's) and a peak library's GEMMs,
    as the workflow's rules run them: one framework a process, as a cell's, and none of its
    unused imports."""
    if job == "peak":
        out = tmp_path / "out"
        args = _peak_job(framework, out)
    else:  # the weights job is the fixture's; the others start from its weights
        weights, profile = request.getfixturevalue("tiny_gpt2_weights")
        if job == "weights":
            _imports_of_one_framework(framework, profile)
            return
        out = tmp_path / "out"
        args = _reference_job(job, weights, out)
    done = subprocess.run([sys.executable, *args], capture_output=True, text=True,
                          timeout=300, env=tool_env(PYTHONPROFILEIMPORTTIME="1"))
    assert done.returncode == 0 and out.exists(), done.stderr[-3000:]
    _imports_of_one_framework(framework, done.stderr)


@pytest.mark.slow  # a PyTorch process exporting a model: 12-16 s
def test_the_onnx_export_imports_pytorch_and_the_exporter_only(tmp_path, tiny_gpt2_weights):
    """ONNX Runtime's model is exported by a PyTorch process of its own, whose time is
    recorded as the export's (`export_s`, like a compilation's): it imports PyTorch and the
    exporter, and none of PyTorch's other unused imports (transformers imported
    scikit-learn, and it JAX: tiny-bert's export took 9.3-11.1 s so, 6.5 s without,
    2026-12-01)."""
    weights, _ = tiny_gpt2_weights
    out = tmp_path / "model.onnx"
    done = subprocess.run([sys.executable, "-m", export.__name__, "--model=tiny-gpt2",
                           f"--weights={weights}", "--threads=2", f"--out={out}"],
                          capture_output=True, text=True, timeout=300,
                          env=tool_env(PYTHONPROFILEIMPORTTIME="1"))
    assert done.returncode == 0 and out.exists(), done.stderr[-3000:]
    imported = _imports_of_one_framework(frameworks.REFERENCE_FRAMEWORK, done.stderr,
                                         keep=export.EXPORTING_PACKAGES)
    assert {"transformers", "onnx", "onnxscript"} <= imported
