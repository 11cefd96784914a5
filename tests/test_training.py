"""The training scenario: the same CNN in every framework (parameters, layer shapes, logits),
data sets built from every source, input-pipeline settings, the cells and their reasons,
and training cells measured for real in every framework."""

import copy
import json
import pickle
import re
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from dlbench.catalogue.models.vision import MODELS, initial_weights
from dlbench.data import __main__ as data_cli
from dlbench.data import cifar10, read_manifest, synthetic
from dlbench.data.pipeline import parse
from dlbench.measure.training import wall_step
from dlbench.plan import config
from dlbench.plan.matrix import expand_cells
from dlbench.records import measuring, result
from tests.conftest import REPO, one_framework, tool_env

CNN = MODELS["cnn"]
# The ablation's loop: 3 steps (10 by default; JAX's CNN step takes ~0.75 s here, 3.9 times
# PyTorch's, and its cells spent 7.6 s of ~27 s in it).
FAST = ["--warmup-iterations=1", "--min-iterations=3", "--min-duration-s=0.1"]


def python(code: str, timeout: int = 300) -> str:
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=timeout, env=tool_env())
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


# -- the model, defined once ----------------------------------------------------------------


def test_the_cnn_is_the_published_one():
    shapes = CNN.shapes()
    assert shapes["fc1.weight"] == (512, 100 * 8 * 8)
    assert np.prod(shapes["fc1.weight"]) + shapes["fc1.bias"][0] == 3_277_312
    assert CNN.parameters() == 3_441_592
    weights = initial_weights(CNN, 0)
    assert all(not w.any() for name, w in weights.items() if name.endswith(".bias"))
    limit = np.sqrt(6 / (3 * 9 + 50 * 9))  # Glorot-uniform, Keras's fans for a 3×3 kernel
    assert 0.95 * limit < np.abs(weights["conv1.weight"]).max() <= limit
    assert all((a == b).all() for a, b in zip(weights.values(),
                                              initial_weights(CNN, 0).values(), strict=True))
    assert not (weights["fc2.weight"] == initial_weights(CNN, 1)["fc2.weight"]).all()


LOGITS = """
import sys, json
import numpy as np
from dlbench.frameworks import load_backend, load_ops
from dlbench.data.synthetic import generate
from dlbench.catalogue.models.vision import MODELS, initial_weights
from dlbench.catalogue.recipes import optimizations; OPTIMIZATIONS = optimizations("training")
ops = load_ops(load_backend({framework!r}, "cpu", 2, 1), "training")
model = ops.build(MODELS["cnn"], initial_weights(MODELS["cnn"], 7), OPTIMIZATIONS["eager"])
manifest = {{"mean": [0.4, 0.45, 0.5], "std": [0.2, 0.25, 0.3]}}
logits = ops.logits(model, generate(16, 3).images, manifest)
np.save({out!r}, logits)
shapes = {shapes}
print(json.dumps({{"parameters": int(count), "shapes": shapes}}))
"""
SHAPES = {
    "pytorch": ("{k: list(v.shape) for k, v in model.state_dict().items()}",
                "sum(p.numel() for p in model.parameters())"),
    "tensorflow": ("{w.name: list(w.shape) for w in model.weights}", "model.count_params()"),
    "jax": ("{'/'.join(k): list(v.shape) for k, v in __import__('flax').traverse_util"
            ".flatten_dict(model.params).items()}",
            "sum(v.size for v in __import__('jax').tree.leaves(model.params))"),
}


@pytest.mark.slow  # a framework process or more each: 11-21 s, the full suite's
def test_every_framework_builds_the_same_function(tmp_path):
    """Same parameter count, the same layers in each framework's layout, and the same
    logits for one batch with dropout off, from the same initial weights (PyTorch's are
    the reference)."""
    found = {}
    for framework, (shapes, count) in SHAPES.items():
        out = tmp_path / f"{framework}.npy"
        code = LOGITS.format(framework=framework, out=str(out), shapes=shapes)
        code = code.replace("int(count)", f"int({count})")
        found[framework] = json.loads(python(code).strip().splitlines()[-1])
        found[framework]["logits"] = np.load(out)
    assert {fw: found[fw]["parameters"] for fw in SHAPES} == dict.fromkeys(SHAPES, 3_441_592)
    shapes = {fw: found[fw]["shapes"] for fw in SHAPES}
    assert shapes["pytorch"]["conv2.weight"] == [50, 50, 3, 3]  # OIHW
    assert shapes["tensorflow"]["conv2/kernel:0"] == shapes["jax"]["conv2/kernel"] == [
        3, 3, 50, 50]  # HWIO
    assert shapes["pytorch"]["fc1.weight"] == [512, 6400]
    assert shapes["tensorflow"]["fc1/kernel:0"] == shapes["jax"]["fc1/kernel"] == [6400, 512]
    a = found["pytorch"]["logits"]
    assert a.shape == (16, 10) and np.abs(a).max() > 1e-3  # not a trivial agreement
    for framework in SHAPES:
        b = found[framework]["logits"]
        assert b.shape == a.shape
        # the fp32 tolerance of inference
        assert np.abs(a - b).max() / np.abs(a).max() < 1e-4, framework


# -- data sets and pipelines -----------------------------------------------------------------


def test_synthetic_images_are_balanced_deterministic_and_varied():
    first, again = synthetic.generate(60, 5), synthetic.generate(60, 5)
    assert first.images.shape == (60, 32, 32, 3) and first.images.dtype == np.uint8
    assert (first.images == again.images).all() and (first.labels == again.labels).all()
    assert np.bincount(first.labels).tolist() == [6] * 10
    same_class = first.images[first.labels == 3].astype(float)
    assert np.abs(same_class[0] - same_class[1]).mean() > 10  # not one image repeated


def test_every_source_builds_a_data_set_with_a_manifest(tmp_path):
    built = data_cli.build("synthetic", tmp_path / "synthetic", 40, 20, 0)
    manifest = read_manifest(built)
    assert manifest["counts"] == {"train": 40, "test": 20}
    assert (tmp_path / "synthetic" / manifest["train"][0][0]).is_file()
    assert len(manifest["mean"]) == len(manifest["std"]) == 3

    digits = read_manifest(data_cli.build("digits", tmp_path / "digits", 0, 0, 0))
    assert digits["counts"]["train"] + digits["counts"]["test"] == 1797  # sklearn's digits
    assert digits["image_shape"] == [32, 32, 3] and digits["classes"][9] == "9"
    # A digit's mirror image is no digit: the augmentation does not flip them.
    assert (manifest["flip"], digits["flip"]) == (True, False)


MIRRORED = """
import json
import numpy as np
from dlbench.data import read_manifest
from dlbench.data.pipeline import parse
from dlbench.frameworks import load_backend, load_ops

ops = load_ops(load_backend({framework!r}, "cpu", 1, 1), "training")
found = {{}}
for folder in {folders!r}:
    for name in ("w0", "memory"):
        mirrored = 0
        for x, _ in ops.pipeline(read_manifest(folder + "/manifest.json"), parse(name), 8, 0)(0):
            x = np.asarray(x)
            x = x if x.shape[-1] == 3 else x.transpose(0, 2, 3, 1)  # N H W C
            mirrored += int(np.sum(x[:, :, :16].mean(axis=(1, 2, 3))
                                   < x[:, :, 16:].mean(axis=(1, 2, 3))))
        found[folder.rsplit("/", 1)[1] + " " + name] = mirrored
ops.release()
print("FOUND", json.dumps(found))
"""


@pytest.mark.slow
@pytest.mark.parametrize("framework", ["pytorch", "tensorflow", "jax"])
def test_every_pipeline_flips_only_a_set_that_allows_it(tmp_path, framework):
    """32 images bright on the left (a crop shifts them by 4 pixels at most): none comes
    out brighter on the right from a set whose manifest says `flip: false`, about half from
    one that allows flips — in the file and the in-memory pipeline of every framework."""
    from dlbench.data import Split, write

    images = np.zeros((32, 32, 32, 3), np.uint8)
    images[:, :, :16] = 255
    split = Split(images, np.arange(32) % 10)
    for flip in (True, False):
        write(tmp_path / f"flip-{flip}", "synthetic", synthetic.CLASSES, split, split,
              {"test": "left half bright"}, flip=flip)
    code = MIRRORED.format(framework=framework,
                           folders=[str(tmp_path / f"flip-{f}") for f in (True, False)])
    done = subprocess.run([sys.executable, "-c", one_framework(framework, code)],
                          capture_output=True, text=True, timeout=300, env=tool_env())
    assert done.returncode == 0, done.stderr[-3000:]
    found = json.loads(done.stdout.split("FOUND ", 1)[1])
    assert found["flip-False w0"] == found["flip-False memory"] == 0, found
    assert 4 <= found["flip-True w0"] <= 28 and 4 <= found["flip-True memory"] <= 28, found


def fake_cifar10(folder, per_batch: int = 12):
    """A tiny CIFAR-10 in the real format: pickled dicts of bytes keys, CHW rows."""
    rng = np.random.default_rng(0)
    folder.mkdir()
    for name in cifar10.TRAIN + cifar10.TEST:
        batch = {b"data": rng.integers(0, 256, (per_batch, 3072), dtype=np.uint8),
                 b"labels": list(rng.integers(0, 10, per_batch))}
        (folder / name).write_bytes(pickle.dumps(batch))
    names = [n.encode() for n in ("airplane", "automobile", "bird", "cat", "deer", "dog",
                                  "frog", "horse", "ship", "truck")]
    (folder / cifar10.META).write_bytes(pickle.dumps({b"label_names": names}))
    return folder


def test_cifar10_from_a_folder_and_clear_errors(tmp_path):
    source = fake_cifar10(tmp_path / "cifar-10-batches-py")
    manifest = read_manifest(data_cli.build("cifar10", tmp_path / "out", 0, 0, 0, str(source)))
    assert manifest["counts"] == {"train": 60, "test": 12}
    assert manifest["classes"][1] == "automobile"
    (source / "data_batch_3").unlink()
    with pytest.raises(ValueError, match="lacks data_batch_3; expected CIFAR-10's python"):
        cifar10.check(source)
    with pytest.raises(ValueError, match="is not set"):
        cifar10.check("")
    training = {"frameworks": ["pytorch"], "devices": ["cpu"], "training": {
        "models": ["cnn"], "datasets": ["cifar10"], "batch_sizes": [64], "pipelines": ["w0"],
        "optimizers": ["sgd"], "optimizations": ["eager"]}}
    with pytest.raises(config.ConfigError, match="data_batch_3"):
        config.validate({**training, "data": {"cifar10_dir": str(source)}})


@pytest.mark.parametrize(("name", "expected"), [
    ("memory", {"in_memory": True, "workers": 0}),
    ("w0", {"in_memory": False, "workers": 0, "prefetch": None, "cache": False}),
    ("w2-p4-cache", {"workers": 2, "prefetch": 4, "cache": True, "pin_memory": False}),
    ("w1-pin", {"workers": 1, "pin_memory": True}),
])
def test_pipeline_names(name, expected):
    described = parse(name).describe()
    assert {k: described[k] for k in expected} == expected


def test_pipeline_names_that_do_not_parse_or_apply():
    with pytest.raises(ValueError, match="expected 'memory' or w<workers>"):
        parse("w-2")
    assert "there is none" in parse("w2-pin").unsupported_reason("pytorch", "cpu")
    assert parse("w2-pin").unsupported_reason("pytorch", "gpu") is None
    assert "tf.data has none" in parse("w2-pin").unsupported_reason("tensorflow", "gpu")
    assert "Grain has none" in parse("w2-pin").unsupported_reason("jax", "gpu")
    assert "with 0 workers" in parse("w0-p2").unsupported_reason("pytorch", "cpu")


# -- cells -------------------------------------------------------------------------------------


def test_training_cells_ids_and_reasons():
    cells = {c.id: c for c in expand_cells(config.validate({
        "frameworks": ["pytorch", "tensorflow"], "devices": ["cpu"], "training": {
            "models": ["cnn"], "datasets": ["synthetic"], "batch_sizes": [64],
            "pipelines": ["w0"], "optimizers": ["adam"],
            "optimizations": ["eager", "channels-last", "channels-first", "xla"]}}))}
    reasons = {i: c.unsupported_reason() for i, c in cells.items()}
    assert reasons["training_pytorch_cnn_cpu_b64_synthetic_w0_adam_eager"] is None
    assert reasons["training_tensorflow_cnn_cpu_b64_synthetic_w0_adam_xla"] is None
    assert reasons["training_pytorch_cnn_cpu_b64_synthetic_w0_adam_xla"] == (
        "optimization 'xla' does not exist in PyTorch training (only in TensorFlow)")
    assert "support only NHWC" in reasons[
        "training_tensorflow_cnn_cpu_b64_synthetic_w0_adam_channels-first"]
    cell = cells["training_pytorch_cnn_cpu_b64_synthetic_w0_adam_eager"]
    assert cell.params() == {"scenario": "training", "framework": "pytorch", "model": "cnn",
                             "device": "cpu", "batch": 64, "dataset": "synthetic",
                             "pipeline": "w0", "optimizer": "adam", "optimization": "eager"}
    assert cell.spec.setting_args(config.validate({
        "frameworks": ["pytorch"], "devices": ["cpu"], "training": {
            "models": ["cnn"], "datasets": ["synthetic"], "batch_sizes": [64],
            "pipelines": ["w0"], "optimizers": ["adam"], "optimizations": ["eager"],
            "learning_rate": {"adam": 0.003}}})["training"], cell)[:2] == [
        "--epochs=10", "--learning-rate=0.003"]


# -- measured for real ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def small_data(tmp_path_factory):
    folder = tmp_path_factory.mktemp("data") / "synthetic"
    data_cli.build("synthetic", folder, 256, 100, 0)
    return folder


def run_training(tmp_path, data, framework, pipeline, optimization, *extra,
                 model: str = "cnn") -> dict:
    return training_cell(tmp_path, data, framework, pipeline, optimization, *extra,
                         model=model)[0]


def training_cell(tmp_path, data, framework, pipeline, optimization, *extra,
                  model: str = "cnn", **env: str) -> tuple[dict, str]:
    """The cell's record and its standard error, `env` added to its environment."""
    out = tmp_path / f"{framework}_{pipeline}_{optimization}.json"
    done = subprocess.run(
        [sys.executable, "-m", "dlbench", "run", "--scenario=training",
         f"--framework={framework}", f"--model={model}", "--device=cpu", "--batch=64",
         "--dataset=synthetic", f"--pipeline={pipeline}", "--optimizer=sgd",
         f"--optimization={optimization}", "--epochs=2", f"--data={data}", *FAST, *extra,
         f"--out={out}"], capture_output=True, text=True, timeout=600, env=tool_env(**env))
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    record = result.read(out)
    assert record["status"] == "ok", record["reason"]
    return record, done.stderr


@pytest.mark.slow
@pytest.mark.parametrize(("framework", "pipeline", "optimization"), [
    ("pytorch", "w2-cache", "eager"), ("pytorch", "memory", "compile"),
    ("tensorflow", "w2-cache", "graph"), ("tensorflow", "memory", "xla"),
    ("jax", "w2-cache", "jit"), ("jax", "memory", "jit"),
])
def test_pipelines_and_recipes_train_and_record(tmp_path, small_data, framework, pipeline,
                                                optimization):
    record = run_training(tmp_path, small_data, framework, pipeline, optimization)
    training, timing = record["training"], record["timing"]
    assert len(training["test_accuracy"]) == len(training["train_loss"]) == 2
    assert training["steps_per_epoch"] == 4 and timing["iterations"] == 2 * 4 - 2
    assert training["train_loss"][1] < training["train_loss"][0]  # it learns
    parts = timing["breakdown"]
    assert len(parts["input_wait"]["samples_ms"]) == timing["iterations"]
    named = ["input_wait", "copy", "forward_backward", "optimizer"]
    assert list(parts) == [*named, "rest"]
    for i, total in enumerate(timing["samples_ms"]):  # the parts are the step, per step …
        assert sum(parts[p]["samples_ms"][i] for p in parts) == pytest.approx(total)
    # … and the named parts explain it within 5%, per step and on average
    assert all(parts["rest"]["samples_ms"][i] <= 0.05 * total
               for i, total in enumerate(timing["samples_ms"]))
    assert sum(parts[p]["share"] for p in named) >= 0.95
    ablation = record["ablation"]
    assert ablation["samples_per_s"] > 0 and ablation["iterations"] >= 3
    assert ablation["efficiency"] == pytest.approx(record["throughput"]["samples_per_s"]
                                                   / ablation["samples_per_s"])
    cache = record["pipeline"]["page_cache"]
    assert cache["files"] == 256 and 0 <= cache["resident_fraction"] <= 1
    assert record["arithmetic"]["tf32"] is False  # float32 as in every scenario
    assert record["pipeline"]["workers"] == (2 if pipeline.startswith("w2") else 0)
    assert record["utilization"]["process_cpu_cores_mean"] > 0


@pytest.mark.slow
def test_the_evaluation_compiles_before_the_timed_steps(tmp_path, small_data):
    """JAX compiles the evaluation (the model's `apply` under jit) at its first call: made
    before the timed steps, and not after the first epoch, inside their window, which the
    supervisor's samples cover (what an H200 showed: docs/what-has-run-where.md). JAX logs
    each compilation as it finishes (JAX_LOG_COMPILES): the evaluation's comes before the
    step's gradients', and once."""
    _, log = training_cell(tmp_path, small_data, "jax", "memory", "jit", "--no-ablation",
                           JAX_LOG_COMPILES="1")
    compiled = re.findall(r"Finished XLA compilation of jit\((\w+)\)", log)
    assert "apply" in compiled and "_gradients_fn" in compiled, compiled
    assert compiled.index("apply") < compiled.index("_gradients_fn"), compiled
    assert compiled.count("apply") == 1, compiled  # and not again between epochs


@pytest.fixture(scope="module")
def digits_data(tmp_path_factory):
    folder = tmp_path_factory.mktemp("data") / "digits"
    data_cli.build("digits", folder, 0, 0, 0)
    return folder


# The accuracy match's settings: the tiny CNN on the digits, Adam, two seeds, 8 epochs, the
# last one decaying (its plateau: 97.5-99.2% over six seeds in each framework, the match's
# 99% tolerance 0.9-1.2 points; after 5 epochs 95.8-98.6% and up to 8.4: bench/accuracy_power.py).
MATCHED = ["--dataset=digits", "--batch=32", "--optimizer=adam", "--seeds=2"]
EPOCHS = 8


def train_digits(folder, data, framework, optimization, rate, *extra, epochs=EPOCHS) -> dict:
    return run_training(folder, data, framework, "memory", optimization, *MATCHED,
                        f"--learning-rate={rate}", f"--epochs={epochs}", *extra,
                        model="tiny-cnn")


@pytest.fixture(scope="module")
def digits_sides(tmp_path_factory, digits_data) -> dict[str, dict]:
    """Every registered framework's record of the tiny CNN trained with the matched
    settings (its default step; the step's parts and the ablation timed, as by default):
    the sides of the accuracy match, and the seeds' test's record. A target accuracy of 1%,
    which any seed reaches, times each seed's time to it (only recorded: the training goes
    on)."""
    from dlbench.catalogue import frameworks

    folder = tmp_path_factory.mktemp("digits-sides")
    return {fw: train_digits(folder, digits_data, fw, frameworks.get(fw).default_step, 0.001,
                             "--target-accuracy=0.01")
            for fw in frameworks.measuring("training")}


@pytest.mark.slow
def test_seeds_train_in_fresh_processes_with_their_times_to_accuracy(digits_sides):
    record = digits_sides["pytorch"]  # two seeds, each in a process of its own
    training = record["training"]
    assert record["settings"]["repeats"] == 2 and record["settings"]["seeds"] == 2
    assert training["seeds"] == [0, 1] and len(training["final_accuracies"]) == 2
    assert training["final_accuracy"] == pytest.approx(np.mean(training["final_accuracies"]))
    assert len(training["test_accuracy_per_seed"]) == 2
    times = training["time_to_accuracy_s_per_seed"]  # any accuracy reaches 1%: both timed
    assert len(times) == 2 and all(t > 0 for t in times)
    assert training["time_to_accuracy_s"] == pytest.approx(np.median(times))
    # What the report compares training by: the wall time per step over both seeds, its
    # interval at least as wide as the pooled steps' t-interval alone.
    rate, steps = record["throughput"], record["timing"]["samples_ms"]
    assert rate["wall_step_ms"] == pytest.approx(rate["wall_s"] * 1e3 / len(steps))
    low, high = rate["wall_step_ms_ci95"]
    pooled = wall_step(steps, rate["wall_s"])["wall_step_ms_ci95"]
    assert low <= pooled[0] <= rate["wall_step_ms"] <= pooled[1] <= high
    # Each seed's own (what `dlbench compare` pairs): as many steps each, their mean.
    walls = [repeat["wall_step_ms"] for repeat in record["timing"]["repeats"]]
    assert len(walls) == 2 and rate["wall_step_ms"] == pytest.approx(np.mean(walls))
    # The step's parts and the ablation, pooled over the seeds as the steps are.
    for part in record["timing"]["breakdown"].values():
        assert len(part["samples_ms"]) == len(steps)
    ablation = record["ablation"]
    assert ablation["efficiency"] == pytest.approx(rate["samples_per_s"]
                                                   / ablation["samples_per_s"])
    # Timed in a block after each epoch, inside the loop's window (what the supervisor's
    # load samples cover), which the run's share of measuring counts once.
    assert ablation["blocks"] == EPOCHS
    assert record["timing"]["loop_s"] > rate["wall_s"] + ablation["wall_s"]
    assert measuring.timed_s(record) == record["timing"]["loop_s"]


def five_points_worse(record: dict) -> dict:
    """The record with every seed's model getting 5% of the test images wrong more (the
    first it got right): a framework that trains a model 5 points worse."""
    record = copy.deepcopy(record)
    training = record["training"]
    images = training["test_images"]
    worse = []
    for wrong in training["wrong_images_per_seed"]:
        right = [i for i in range(images) if i not in set(wrong)]
        worse.append(sorted({*wrong, *right[:round(0.05 * images)]}))
    accuracies = [1 - len(w) / images for w in worse]
    training.update(wrong_images_per_seed=worse, final_accuracies=accuracies,
                    final_accuracy=float(np.mean(accuracies)))
    return record


@pytest.mark.slow
def test_the_match_tells_two_different_models_from_the_same_one(tmp_path, digits_data,
                                                                digits_sides):
    """Real training of the tiny CNN (the CNN's layers at a tenth of its work) on the digits
    (1,438 images, 359 to test), two seeds a framework: every registered framework with the
    same settings (its default step) is a **match**, judged image by image: its models pass
    the independence check — their spread, estimated image by image, is narrow enough to
    see the configured 2 points (six seeds a framework of these settings: every one of the
    15 pairs of seeds matched, bench/accuracy_power.py). The check fails alike models by
    design in 1% of runs (models that vary as a whole: undecided, by the seeds' spread);
    this test accepts no such outcome, so such a run fails it rather than pass on an
    'undecided'. One framework's models 5 points worse (18 more test images wrong each,
    planted in its real records) is then a mismatch that names it, the others still a
    match. A PyTorch cell trained with a
    learning rate 10,000× lower — a framework that ignores its learning rate, say — while
    its record claims the same configuration (and, to save time, trained one epoch where it
    claims eight), is a mismatch, both sides' cells counted as wrong answers."""
    from dlbench.analysis import training
    from dlbench.analysis.summary import derive
    from dlbench.records import aggregate

    def row(record: dict, claimed: dict) -> dict:
        record = copy.deepcopy(record)
        record["training"].update(claimed)  # what the configuration asked for
        return aggregate.to_row(record, tmp_path / f"{record['cell_id']}.json")

    asked = {"learning_rate": 0.001, "epochs": EPOCHS}
    assert all(r["training"]["epochs"] == EPOCHS for r in digits_sides.values())
    sides = {fw: row(record, asked) for fw, record in digits_sides.items()}
    alike = derive(aggregate.table(list(sides.values())))
    verdict = training.accuracy_match(alike).iloc[0]
    assert (verdict["verdict"], verdict["noise"]) == ("match", "images"), verdict.to_dict()
    assert not alike["wrong_answer"].any() and alike["checked"].all()
    # The last framework's models 5 points worse: named, the others still a match.
    off = list(sides)[-1]
    planted = {**sides, off: row(five_points_worse(digits_sides[off]), asked)}
    cells = derive(aggregate.table(list(planted.values())))
    verdict = training.accuracy_match(cells).iloc[0]
    assert (verdict["verdict"], verdict["differs"]) == ("mismatch", [off]), verdict.to_dict()
    assert all(verdict[f"{fw} verdict"] == "match" for fw in sides if fw != off)
    assert cells.set_index("framework")["wrong_answer"].to_dict() == {
        fw: fw == off for fw in sides}
    # foreach: the same arithmetic, its own id. One epoch: at this rate the weights barely
    # move (Adam's steps are about the rate), so eight would learn as little.
    trained = train_digits(tmp_path, digits_data, "pytorch", "foreach", 1e-7, "--no-ablation",
                           "--no-breakdown", epochs=1)
    assert trained["training"]["epochs"] == 1 and trained["training"]["learning_rate"] == 1e-7
    slow = row(trained, asked)  # claims the same configuration as the sides
    different = derive(aggregate.table([slow, sides["tensorflow"]]))
    verdict = training.accuracy_match(different).iloc[0]
    assert verdict["verdict"] == "mismatch", verdict.to_dict()
    assert different["wrong_answer"].all()


@pytest.mark.slow
def test_training_through_the_workflow_to_the_report(tmp_path, measured_once):
    """Both frameworks train the CNN for one short epoch on a few hundred images, through
    the real workflow: the data set is built once, every result validates, and the report's
    training section shows the accuracy match, the throughput table and the figures."""
    import pandas as pd

    from tests import report_html
    from tests.conftest import REPO, snakemake, start_from

    start_from(measured_once, tmp_path, kept=["peak"])
    matrix = {"frameworks": ["pytorch", "tensorflow"], "devices": ["cpu"],
              "training": {"models": ["cnn"], "datasets": ["synthetic"], "batch_sizes": [32],
                           "pipelines": ["w0"], "optimizers": ["sgd"],
                           "optimizations": ["eager", "graph"], "epochs": 1},
              "data": {"synthetic_train": 200, "synthetic_test": 100},
              "measurement": {"warmup_iterations": 1}}
    profile = ["--workflow-profile", str(REPO / "workflow" / "profiles" / "default")]
    run = snakemake(tmp_path, matrix, *profile, "--cores", "2")
    assert run.returncode == 0, run.stderr[-3000:]
    assert read_manifest(tmp_path / "results/data/synthetic/manifest.json")["counts"] == {
        "train": 200, "test": 100}
    summary = pd.read_parquet(tmp_path / "results" / "summary.parquet").set_index("cell_id")
    ok = summary[summary["status"] == "ok"]
    assert sorted(ok.index) == ["training_pytorch_cnn_cpu_b32_synthetic_w0_sgd_eager",
                                "training_tensorflow_cnn_cpu_b32_synthetic_w0_sgd_eager",
                                "training_tensorflow_cnn_cpu_b32_synthetic_w0_sgd_graph"]
    for cell, row in ok.iterrows():
        result.read(tmp_path / "results" / "runs" / f"{cell}.json")
        assert len(row["training_test_accuracy"]) == 1
        assert 0 <= row["breakdown_input_wait_share"] < 1
    html = (tmp_path / "report" / "report.html").read_text()
    assert "Training: the same CNN, trained from image files" in html
    assert "Final test accuracy per framework" in html
    throughput = next(rows for _, rows in report_html.tables(html)
                      if "waiting for data" in rows[0])
    assert len(throughput) == 1 + 3  # a header and the three cells that ran
    # Accuracy curves; step parts beside the distribution; the efficiency section's figure.
    images = report_html.images(html)
    assert len(images) == 3 and all(w > 300 and h > 200 for w, h in images)


# -- the analysis: accuracy match --------------------------------------------------------------


def trained_cells(*rows, test_images: int = 250, tolerance: float = 0.02) -> pd.DataFrame:
    """Synthetic training rows: (framework, optimization, final accuracy, seeds' accuracies
    or None for one seed[, median ms]), tested on `test_images` images."""
    from dlbench.analysis.summary import derive

    frame = pd.DataFrame([{
        "cell_id": f"{fw}_{opt}_{i}", "scenario": "training", "framework": fw, "model": "cnn",
        "device": "cpu", "batch": 64, "dataset": "synthetic", "pipeline": "w0",
        "optimizer": "sgd", "optimization": opt, "status": "ok", "reason": None,
        "median_ms": ms[0] if ms else 100.0, "samples_per_s": 640.0,
        "training_learning_rate": 0.01, "training_epochs": 10,
        "training_accuracy_tolerance": tolerance, "training_test_images": test_images,
        "training_final_accuracy": acc, "training_final_accuracies": seeds,
        "training_seed": 0, "training_seeds": None if seeds is None else list(range(len(seeds))),
        "training_time_to_accuracy_s": None, "breakdown_input_wait_share": 0.1,
    } for i, (fw, opt, acc, seeds, *ms) in enumerate(rows)])
    return derive(frame)


def half_width(*binomial: float, models: float = 0.0, dof: int = 0, pairs: int = 1) -> float:
    """The accuracy match's statistical tolerance, written out: 99% two-sided over `pairs`
    pairs; Student's t at `dof` times the models' pooled error where it is measured, else
    the normal quantile times the binomial error."""
    from scipy.stats import norm
    from scipy.stats import t as student

    level = 1 - 0.01 / (2 * pairs)
    if models:
        return student.ppf(level, dof) * np.sqrt(models)
    return norm.ppf(level) * np.sqrt(sum(binomial))


def test_a_difference_inside_the_configured_tolerance_matches_where_the_test_can_tell():
    """1 point apart, the configured tolerance 2: on 10,000 test images the noise (±1.5
    points, 99%) is narrower than 2 points, so a difference that matters would show: a
    match. On 250 images (±9.3 points) it would not: undecided, not a match."""
    from dlbench.analysis import training

    rows = (("pytorch", "eager", 0.80, None), ("tensorflow", "graph", 0.79, None))
    match = training.accuracy_match(trained_cells(*rows, test_images=10_000))
    assert match.loc[0, "verdict"] == "match"
    assert match.loc[0, "difference"] == pytest.approx(0.01)
    assert match.loc[0, "statistical"] < match.loc[0, "configured"] == 0.02
    small = training.accuracy_match(trained_cells(*rows))
    assert small.loc[0, "statistical"] > 0.02 and small.loc[0, "verdict"] == "undecided"
    assert training.match_table(small).loc[0, "verdict"] == "undecided: 1 seed"
    cells = trained_cells(*rows)
    assert not cells["checked"].any() and not cells["wrong_answer"].any()


def test_a_difference_inside_the_binomial_tolerance_is_undecided_and_beyond_it_mismatches():
    """4 points apart, one seed a side: beyond the configured 2 points, but with 250 test
    images each side's accuracy is uncertain by ±2.6 points (1σ): undecided (it was called
    a match). The same accuracies on 10,000 test images are 4 points apart for real (±1.5
    points at 99%): a mismatch."""
    from dlbench.analysis import training

    rows = (("pytorch", "eager", 0.80, None), ("tensorflow", "graph", 0.76, None))
    small = training.accuracy_match(trained_cells(*rows))
    expected = half_width(0.8 * 0.2 / 250, 0.76 * 0.24 / 250)  # 9.5 points
    assert small.loc[0, "statistical"] == pytest.approx(expected)
    assert small.loc[0, "configured"] == pytest.approx(0.02)
    assert small.loc[0, "verdict"] == "undecided"
    large = training.accuracy_match(trained_cells(*rows, test_images=10_000))
    assert large.loc[0, "statistical"] < 0.02 and large.loc[0, "verdict"] == "mismatch"
    table = training.match_table(large)
    assert table.loc[0, "PyTorch accuracy"] == "80.0% (1 seed)"
    assert table.loc[0, "tolerance (configured)"] == "2.0%"
    assert table.loc[0, "tolerance (99%)"] == f"{large.loc[0, 'statistical']:.1%} binomial"
    assert table.loc[0, "verdict"] == "✗ mismatch: PyTorch and TensorFlow disagree"


def test_one_seed_a_side_can_mismatch_and_the_cells_count_as_wrong_answers():
    from dlbench.analysis import training

    cells = trained_cells(("pytorch", "eager", 0.80, None), ("tensorflow", "graph", 0.60, None))
    match = training.accuracy_match(cells)
    assert match.loc[0, "verdict"] == "mismatch"  # 20 points against a 99% noise of 10
    assert cells["checked"].all() and cells["wrong_answer"].all()
    assert training.throughput_table(cells)["accuracy"].str.endswith("✗").all()


def test_seeds_add_test_images_and_their_spread_widens_the_tolerance():
    from dlbench.analysis import training

    # Seeds 10 points apart on each side: the models' variance (pooled: 2 × 0.05², 2 degrees
    # of freedom) is the error, and is barely known: ±70 points.
    spread = training.accuracy_match(trained_cells(
        ("pytorch", "eager", 0.75, [0.70, 0.80]), ("tensorflow", "graph", 0.71, [0.66, 0.76])))
    assert spread.loc[0, "verdict"] == "undecided"
    assert spread.loc[0, "statistical"] == pytest.approx(half_width(
        0.75 * 0.25 / 500, 0.71 * 0.29 / 500, models=2 * 0.05 ** 2 * (1 / 2 + 1 / 2), dof=2))
    # Seeds that agree, 10 points apart: two a side cannot show that the spread is that
    # small (±14 points); eight a side can (14 degrees of freedom: ±1.6 points).
    def close(seeds):
        return training.accuracy_match(trained_cells(
            ("pytorch", "eager", 0.80, [0.79, 0.81] * seeds),
            ("tensorflow", "graph", 0.70, [0.69, 0.71] * seeds))).loc[0]

    two, eight = close(1), close(4)
    assert two["pytorch seeds"] == two["tensorflow seeds"] == 2
    assert two["statistical"] == pytest.approx(half_width(
        models=2 * 0.01 ** 2 * (1 / 2 + 1 / 2), dof=2))
    assert two["verdict"] == "undecided" and eight["verdict"] == "mismatch"


def test_two_seeds_cannot_call_a_match_that_eight_can():
    """The same seed-to-seed spread (±1 point) and a 1-point difference, on 10,000 test
    images: with two seeds a side the spread is known to 2 degrees of freedom, the noise
    (±14 points) hides any difference that matters — undecided, '2 seeds'; with eight a
    side (14 degrees of freedom) the noise is ±1.6 points, under the configured 2: a match."""
    from dlbench.analysis import training

    def match(seeds):
        return training.accuracy_match(trained_cells(
            ("pytorch", "eager", 0.81, [0.80, 0.82] * seeds),
            ("tensorflow", "graph", 0.80, [0.81, 0.79] * seeds), test_images=10_000))

    two, eight = match(1), match(4)
    assert two.loc[0, "difference"] == eight.loc[0, "difference"] == pytest.approx(0.01)
    assert two.loc[0, "verdict"] == "undecided" and two.loc[0, "statistical"] > 0.1
    assert training.match_table(two).loc[0, "verdict"] == "undecided: 2 seeds"
    assert eight.loc[0, "verdict"] == "match" and eight.loc[0, "statistical"] < 0.02


def with_wrong_images(wrong: dict[str, list[set[int]]], test_images: int = 359,
                      tolerance: float = 0.02) -> pd.DataFrame:
    """One cell per framework whose seeds got `wrong[framework]`'s test images wrong."""
    from dlbench.analysis.summary import derive

    rows = []
    for fw, models in wrong.items():
        accuracies = [1 - len(w) / test_images for w in models]
        rows.append((fw, "eager", float(np.mean(accuracies)), accuracies))
    frame = trained_cells(*rows, test_images=test_images, tolerance=tolerance)
    frame["training_wrong_images_per_seed"] = [[sorted(w) for w in models]
                                               for models in wrong.values()]
    return derive(frame)


def image_half_width(seeds: list[list[set[int]]], images: int, pairs: int) -> float:
    """The statistical tolerance from the models' spread image by image, written out, for
    sides with one model per seed, every side the same seeds (`seeds`: each seed's models):
    p_i the share of a seed's K models right on image i, one model's variance Σ p_i(1 −
    p_i)/n² × K/(K − 1), a side's mean's the seeds' sum over seeds², the difference's twice
    that; the normal quantile at 99% over `pairs` pairs."""
    from scipy.stats import norm

    def variance(models):
        right = np.array([sum(i not in w for w in models) / len(models)
                          for i in range(images)])
        return np.sum(right * (1 - right)) / images ** 2 * len(models) / (len(models) - 1)

    side = sum(variance(models) for models in seeds) / len(seeds) ** 2
    return norm.ppf(1 - 0.01 / (2 * pairs)) * np.sqrt(2 * side)


def independent_models(seed: int, count: int, hard: int = 20, miss: float = 0.3,
                       images: int = 359) -> list[set[int]]:
    """Models that get each of `hard` test images wrong with probability `miss`, each
    independently (trained alike: their errors are independent draws), the rest right."""
    rng = np.random.default_rng(seed)
    hard_images = np.arange(0, images, images // hard)[:hard]
    return [set(hard_images[rng.random(hard) < miss].tolist()) for _ in range(count)]


def test_two_seeds_a_side_match_or_see_five_points_from_the_models_spread_image_by_image():
    """The default's shape (3 frameworks, 2 seeds a side, 359 test images) with models that
    spread as the CNN trained on the digits does (here 20 hard images, each missed by 30% of
    the models: one model's accuracy spreads by ~0.6 points): the spread estimated over the
    test images (Σ p_i(1 − p_i), 359 terms rather than 3 degrees of freedom) is narrow
    enough for a match; JAX's models 5 points worse (18 more images wrong each) are a
    mismatch that names JAX, and PyTorch and TensorFlow stay a match."""
    from dlbench.analysis import training

    models = independent_models(0, 6)
    alike = {"pytorch": models[:2], "tensorflow": models[2:4], "jax": models[4:]}
    match = training.accuracy_match(with_wrong_images(alike)).iloc[0]
    assert (match["verdict"], match["noise"]) == ("match", "images"), match.to_dict()
    assert match["statistical"] == pytest.approx(image_half_width([models[::2], models[1::2]],
                                                                  359, 3))
    assert match["statistical"] < 0.02
    # JAX 5 points off: each of its models misses 18 more images (of those all others get).
    worse = {**alike, "jax": [w | set(range(1, 359, 19)[:18]) for w in models[4:]]}
    assert all(len(w) - len(v) == 18 for w, v in zip(worse["jax"], models[4:], strict=True))
    cells = with_wrong_images(worse)
    match = training.accuracy_match(cells).iloc[0]
    assert (match["verdict"], match["differs"]) == ("mismatch", ["jax"]), match.to_dict()
    assert (match["pytorch verdict"], match["tensorflow verdict"]) == ("match", "match")
    assert list(cells.set_index("framework")["wrong_answer"].items()) == [
        ("pytorch", False), ("tensorflow", False), ("jax", True)]
    table = training.match_table(training.accuracy_match(cells))
    assert table.loc[0, "tolerance (99%)"] == f"{match['statistical']:.1%} by image"


def test_a_seeds_models_are_compared_with_the_same_seeds_models():
    """Every framework starts a seed from the same weights, and a seed's models can end
    alike across frameworks more than two seeds' do (seen in the tests' real training:
    99.2-99.4% for seed 0, 97.8-98.1% for seed 1 in every framework). The seeds are then
    strata: the seed's difference cancels in the comparison, a match; pooled as one
    stratum, it would look like models that vary as a whole (undecided). Sides with other
    seeds than each other's are not paired."""
    from dlbench.analysis import training

    base = independent_models(2, 6)
    late = set(range(3, 359, 36))  # 10 images every framework's seed-1 model misses
    paired = {"pytorch": [base[0], base[1] | late], "tensorflow": [base[2], base[3] | late],
              "jax": [base[4], base[5] | late]}
    match = training.accuracy_match(with_wrong_images(paired)).iloc[0]
    assert (match["verdict"], match["noise"]) == ("match", "images"), match.to_dict()
    cells = with_wrong_images(paired)
    cells.loc[cells["framework"] == "jax", "training_seeds"] = pd.Series(
        [[2, 3]], index=cells.index[cells["framework"] == "jax"])
    match = training.accuracy_match(cells).iloc[0]
    assert (match["verdict"], match["noise"]) == ("undecided", "seeds"), match.to_dict()


def test_a_seed_whose_models_all_missed_the_same_images_still_has_a_spread():
    """Near the plateau every framework's seed-0 model may miss the same two images: no
    spread image by image, but not none at all — a floor of one image that one model
    missed, so that the other seed's models are still compared (a match, not undecided)."""
    from dlbench.analysis import training

    base = independent_models(3, 3)
    same = {5, 77}
    alike = {"pytorch": [same, base[0]], "tensorflow": [same, base[1]], "jax": [same, base[2]]}
    match = training.accuracy_match(with_wrong_images(alike)).iloc[0]
    assert (match["verdict"], match["noise"]) == ("match", "images"), match.to_dict()
    assert match["statistical"] > 0


def test_a_frameworks_recipes_of_one_seed_count_as_one_model():
    """A framework's eager and graph cells of a seed start from the same weights and read
    the same batches: not two independent models. A second, identical recipe in every
    framework does not narrow the tolerance."""
    from dlbench.analysis import training
    from dlbench.analysis.summary import derive

    models = independent_models(4, 6)
    alike = {"pytorch": models[:2], "tensorflow": models[2:4], "jax": models[4:]}
    once = with_wrong_images(alike)
    twice = pd.concat([once, once.assign(optimization="graph",
                                         cell_id=once["cell_id"] + "_graph")])
    one = training.accuracy_match(once).iloc[0]
    two = training.accuracy_match(derive(twice.reset_index(drop=True))).iloc[0]
    assert two["noise"] == "images" and two["statistical"] == pytest.approx(one["statistical"])


def test_sides_whose_seeds_differ_in_their_shares_are_not_paired():
    """Seeds are strata only where every framework trained them in the same shares: JAX
    with seed 1 twice (two cells) and seed 0 once is compared unpaired."""
    from dlbench.analysis import training

    models = independent_models(5, 7)
    alike = {"pytorch": models[:2], "tensorflow": models[2:4], "jax": models[4:6]}
    cells = with_wrong_images(alike)
    extra = cells[cells["framework"] == "jax"].assign(
        optimization="jit", cell_id="jax_jit", training_seeds=[[1]],
        training_final_accuracies=[[1 - len(models[6]) / 359]],
        training_wrong_images_per_seed=[[sorted(models[6])]])
    from dlbench.analysis.summary import derive

    both = derive(pd.concat([cells, extra]).reset_index(drop=True))
    paired = training.accuracy_match(cells).iloc[0]
    unpaired = training.accuracy_match(both).iloc[0]
    assert paired["noise"] == unpaired["noise"] == "images"
    # Unpaired: one stratum of six units — a framework's models of a seed, JAX's two of seed
    # 1 one unit, each image's share of them right —, each side's mean over its two.
    def right(*wrong):
        return np.array([np.mean([i not in w for w in wrong]) for i in range(359)])

    units = [right(models[k]) for k in range(5)] + [right(models[5], models[6])]
    one = np.sum(np.var(units, axis=0, ddof=1)) / 359 ** 2
    from scipy.stats import norm

    width = norm.ppf(1 - 0.01 / 6) * np.sqrt(one / 2 + one / 2)
    assert unpaired["statistical"] == pytest.approx(width)


def test_a_model_that_got_every_test_image_right_keeps_an_empty_list(tmp_path):
    """An empty list of wrong images stays a list in the summary (it was joined as text,
    and a column of lists and text does not write to parquet), and reads back."""
    from dlbench.analysis import training
    from dlbench.records import aggregate

    flat = aggregate._flatten("training_", {"wrong_images_per_seed": [[]]})
    assert flat == {"training_wrong_images_per_seed": [[]]}
    cells = with_wrong_images({"pytorch": [set(), {3, 9}], "tensorflow": [{3}, {9}]})
    cells.to_parquet(tmp_path / "summary.parquet")
    back = pd.read_parquet(tmp_path / "summary.parquet")
    assert training.accuracy_match(back).iloc[0]["noise"] == "images"


def test_models_that_vary_as_a_whole_are_judged_by_the_seeds_spread():
    """Undertrained models vary as a whole (the digits with flips after 3 epochs: 82.5-91.4%
    over 6 seeds of one framework, a spread the images alone put at ≤ 1.8 points): where
    the seeds' spread is beyond what the image-by-image estimate allows (χ² at 99%), the
    seeds' spread is the error, with its few degrees of freedom — undecided, not a match."""
    from dlbench.analysis import training

    base = independent_models(1, 6)
    many = set(range(0, 359, 9))  # 40 images: a model 11 points worse than the others
    varying = {"pytorch": [base[0], base[1] | many], "tensorflow": [base[2] | many, base[3]],
               "jax": [base[4], base[5] | many]}
    match = training.accuracy_match(with_wrong_images(varying)).iloc[0]
    assert (match["verdict"], match["noise"]) == ("undecided", "seeds"), match.to_dict()


def test_the_recipes_of_one_seed_are_one_sample():
    """eager and graph of one framework start from the same seed and read one test set: two
    cells, not two test sets' worth of images (their models' spread is counted apart)."""
    from dlbench.analysis import training

    match = training.accuracy_match(trained_cells(
        ("pytorch", "eager", 0.80, None), ("tensorflow", "eager", 0.76, None),
        ("tensorflow", "graph", 0.78, None)))
    assert match.loc[0, "tensorflow seeds"] == 1
    assert match.loc[0, "tensorflow accuracy"] == pytest.approx(0.77)
    # Their two models' spread is the error (1 degree of freedom).
    assert match.loc[0, "statistical"] == pytest.approx(half_width(
        models=0.01 ** 2 * 2 * (1 + 1 / 2), dof=1))


def test_the_spread_between_one_seeds_recipes_is_noise_not_a_mismatch():
    """The default run's digits (359 test images, 2 seeds, 3 epochs): TensorFlow's eager
    and graph cells of one seed ended 9.5 points apart, PyTorch 4.7 points above their
    mean. Averaged per seed, TensorFlow's two seeds agreed to 0.1 point and the binomial
    error alone called it a mismatch; the trained models' own spread makes it undecided.
    Where the recipes agree closely, a wider gap (6.6 points) is a mismatch."""
    from dlbench.analysis import training

    def verdict(tf_eager, tf_graph):
        cells = trained_cells(("pytorch", "eager", 0.897, [0.9025, 0.8914]),
                              ("tensorflow", "eager", 0.823, tf_eager),
                              ("tensorflow", "graph", 0.877, tf_graph), test_images=359)
        return training.accuracy_match(cells).loc[0]

    spread = verdict([0.8022, 0.8440], [0.8969, 0.8579])
    assert (spread["verdict"], spread["tensorflow seeds"]) == ("undecided", 2)
    assert verdict([0.8290, 0.8300], [0.8310, 0.8320])["verdict"] == "mismatch"


def test_two_seeds_that_agree_do_not_hide_the_models_spread():
    """A real run of the default's digits (359 test images, 2 seeds, 3 epochs): PyTorch's
    seeds 88.0 and 87.7%, TensorFlow's 92.5 and 92.2%, JAX's 94.2 and 90.5%. A side's own
    spread (0.3 points) let the binomial error alone decide PyTorch against TensorFlow, and
    4.5 points apart was called a mismatch of frameworks that train alike. The models'
    spread pooled over the sides (JAX's shows it) makes it undecided; JAX 20 points below
    is still a mismatch."""
    from dlbench.analysis import training

    def verdict(shift):
        cells = trained_cells(("pytorch", "eager", 0.8788, [0.8802, 0.8774]),
                              ("tensorflow", "graph", 0.9234, [0.9248, 0.9220]),
                              ("jax", "jit", 0.9234 - shift, [0.9415 - shift, 0.9053 - shift]),
                              test_images=359)
        return training.accuracy_match(cells).loc[0]

    alike = verdict(0.0)
    assert alike["verdict"] == "undecided" and alike["difference"] > 0.04
    assert verdict(0.2)["verdict"] == "mismatch"


def test_a_reduced_precision_is_compared_apart_from_fp32():
    """bf16 that learns less is a mismatch of the bf16 cells alone: pooled with fp32 (as
    before), PyTorch's mean would have dragged its fp32 cell into the mismatch too."""
    from dlbench.analysis import training

    cells = trained_cells(
        ("pytorch", "eager", 0.80, [0.80, 0.80]), ("tensorflow", "graph", 0.80, [0.80, 0.80]),
        ("pytorch", "eager-bf16", 0.50, [0.50, 0.50]),
        ("tensorflow", "eager-bf16", 0.80, [0.80, 0.80]), test_images=10_000)
    match = training.accuracy_match(cells).set_index("precision")
    assert match.loc["fp32", "verdict"] == "match"
    assert match.loc["bf16", "verdict"] == "mismatch"
    wrong = cells.set_index("optimization")["wrong_answer"]
    assert not wrong["eager"].any() and not wrong["graph"]
    assert wrong["eager-bf16"].all()


def test_a_mismatched_cell_is_out_of_the_answer_the_speed_ups_and_the_efficiency_averages():
    from dlbench.analysis import efficiency, headline, training

    cells = trained_cells(
        ("pytorch", "eager", 0.80, [0.80, 0.80], 100.0),
        ("tensorflow", "graph", 0.80, [0.80, 0.80], 90.0),
        ("pytorch", "eager-bf16", 0.50, [0.50, 0.50], 40.0),
        ("tensorflow", "eager-bf16", 0.80, [0.80, 0.80], 50.0), test_images=10_000)
    answer = headline.winners(cells)["training"].iloc[0]
    assert answer["fastest"] == "TensorFlow graph" and answer["correct"] == "✓"
    assert answer["faster but wrong"] == "✗ PyTorch eager-bf16, ✗ TensorFlow eager-bf16"
    cells = cells.assign(flops=1e9, fraction_of_peak=0.5, achieved_gflops=10.0)
    averaged = efficiency.by_optimization(cells, several_devices=False)
    assert list(averaged["precision"]) == ["fp32", "fp32"]  # no bf16 cell is averaged
    assert headline.attention(cells).set_index("kind").loc["wrong answer", "cells"] == 2
    # PyTorch eager-bf16 is 2.5× its eager, but with a mismatch: that speed-up does not count.
    table = training.throughput_table(cells).set_index(["framework", "optimization"])
    assert cells.set_index("optimization").loc["eager-bf16", "speedup"].max() == 2.5
    assert table.loc[("PyTorch", "eager-bf16"), "vs eager"] == ""
    assert table.loc[("PyTorch", "eager"), "vs eager"] == "1.00×"


def test_without_the_test_set_size_one_seed_a_side_is_not_established():
    """A summary written before the test set's size was recorded: no statistical tolerance,
    so a difference beyond the configured one with one seed a side is not established, and
    the cells are neither checked nor wrong."""
    from dlbench.analysis import training

    cells = trained_cells(("pytorch", "eager", 0.80, None), ("tensorflow", "graph", 0.70, None),
                          test_images=None)
    assert training.accuracy_match(cells).loc[0, "verdict"] == "not established"
    assert not cells["checked"].any() and not cells["wrong_answer"].any()


def test_a_cell_without_the_other_framework_is_not_checked():
    cells = trained_cells(("pytorch", "eager", 0.80, None), ("pytorch", "eager-bf16", 0.5, None))
    assert not cells["checked"].any() and not cells["wrong_answer"].any()


def test_time_to_accuracy_leaves_the_first_steps_compilation_out():
    """A step whose first call compiles for 0.4 s (cold; a later round finds its program in
    the cache) and then takes 1 ms, fed by a pipeline whose first batch of an epoch takes
    0.2 s: the time to the target (reached after the first epoch) is that epoch's time but
    the compilation — the pipeline's start counts, as in every later epoch."""
    import time

    from dlbench.measure.training import Evaluation, train

    class Step:
        separable, calls = False, 0

        def to_device(self, batch):
            return batch

        def compute(self, x, y):
            Step.calls += 1
            time.sleep(0.4 if Step.calls == 1 else 0.001)
            return 0.0

    def batches(epoch):
        time.sleep(0.2)  # the workers' start
        yield from [(0, 0)] * 5

    labels = np.arange(10) % 2
    run = train(epochs=2, batches=batches, step=Step(),
                synchronize=lambda: None, mean_loss=lambda losses: 0.0,
                evaluation=Evaluation(lambda: np.eye(2)[labels], labels), steps_per_epoch=5,
                warmup=1, target_accuracy=0.7, mark=lambda phase: None, breakdown=False)
    assert run.test_accuracy == [1.0, 1.0]
    assert run.first_step_s >= 0.6 and 0.4 <= run.first_compute_s < 0.5
    assert run.time_to_accuracy_s == pytest.approx(run.epoch_s[0] - run.first_compute_s)
    assert 0.2 <= run.time_to_accuracy_s < 0.3


def test_time_to_accuracy_per_seed_and_their_median():
    from dlbench.analysis import training

    cells = trained_cells(("pytorch", "eager", 0.80, [0.8, 0.8, 0.8]),
                          ("tensorflow", "graph", 0.80, [0.8, 0.8]))
    cells["training_time_to_accuracy_s_per_seed"] = [[12.0, 10.0, None], [20.0, None]]
    cells["training_time_to_accuracy_s"] = [12.0, None]
    times = training.throughput_table(cells).set_index("framework")["time to target (s)"]
    assert times["PyTorch"] == "12.0 (12.0, 10.0, not reached)"
    assert times["TensorFlow"] == "not reached (20.0, not reached)"  # half never reached it


SCALED = """
import json
import jax.numpy as jnp
import numpy as np
from dlbench.frameworks.jax.optimizer import (INITIAL_SCALE, make_optimizer, scaled_update,
                                              schedule)
from dlbench.catalogue.optimizers import OPTIMIZERS, LearningRate
# SGD with momentum 0.9 (v = 0.9 v + g; w -= rate × v) at the rate 0.1, then 0.05.
opt = make_optimizer(OPTIMIZERS["sgd"], schedule(LearningRate(0.1, 2, 2)))
params = {{"w": jnp.ones(3)}}
state, scale, good = opt.init(params), jnp.float32(INITIAL_SCALE), jnp.int32(0)
grads = {{"w": jnp.asarray(json.loads({grads!r}), jnp.float32) * scale}}
params, state, scale, good = scaled_update(opt, grads, state, params, scale, good)
first = {{"w": np.asarray(params["w"]).tolist(), "scale": float(scale), "good": int(good)}}
ones = {{"w": jnp.ones(3, jnp.float32) * scale}}
params, state, scale, good = scaled_update(opt, ones, state, params, scale, good)
print(json.dumps({{**first, "then": np.asarray(params["w"]).tolist()}}))
"""


@pytest.mark.slow
@pytest.mark.parametrize(("grads", "applied"), [([1.0, 2.0, 3.0], True),
                                                ([1.0, float("inf"), 3.0], False)])
def test_jax_fp16_skips_a_step_with_inf_gradients_and_halves_its_scale(grads, applied):
    """JAX's loss scaling (optax has none), as PyTorch's GradScaler: finite gradients are
    unscaled and applied; one inf among them skips the step and halves the scale. The
    learning rate's schedule counts the skipped step all the same (as PyTorch's and Keras's
    do): the next step takes the second step's rate, half the first's."""
    found = json.loads(python(SCALED.format(grads=json.dumps(grads))).strip().splitlines()[-1])
    expected = [1 - 0.1 * g for g in grads] if applied else [1.0, 1.0, 1.0]
    assert np.allclose(found["w"], expected)
    assert found["scale"] == 2.0**16 * (1 if applied else 0.5)
    assert found["good"] == (1 if applied else 0)
    velocity = [1 + 0.9 * g for g in grads] if applied else [1.0, 1.0, 1.0]
    assert np.allclose(found["then"], [w - 0.05 * v for w, v in zip(expected, velocity,
                                                                    strict=True)])


def test_the_wall_time_per_step_and_its_interval_widen_with_the_seeds_spread():
    """What the report compares training cells by: the wall time per step with the
    t-interval of the mean step, which with several seeds is never narrower than the
    spread of the seeds' own wall times (their steps are not independent draws)."""
    from dlbench.measure.stats import t95

    steps = [4.0, 15.0] * 20  # bimodal: a batch waited for, a batch ready
    one = wall_step(steps, sum(steps) / 1e3)
    assert one["wall_step_ms"] == pytest.approx(9.5)
    low, high = one["wall_step_ms_ci95"]
    assert low < 9.5 < high and high - low == pytest.approx(
        2 * t95(39) * float(np.std(steps, ddof=1)) / 40**0.5)
    apart = wall_step(steps, sum(steps) / 1e3, per_process_steps_ms=[7.0, 12.0])
    assert apart["wall_step_ms_ci95"][1] - apart["wall_step_ms_ci95"][0] > 2 * (high - low)
    agree = wall_step(steps, sum(steps) / 1e3, per_process_steps_ms=[9.5, 9.5])
    assert agree["wall_step_ms_ci95"] == pytest.approx([low, high])


def test_the_seeds_first_epochs_are_pooled_not_the_first_seeds_alone():
    """Two seeds of a trained cell (its rounds): the first epoch's figures in the combined
    record are the seeds' median, not the first seed's alone (the default run's JAX cell
    showed its first round's 195 images/s after the first step, its second's 181, beside
    figures of both rounds), from the default run's real record."""
    from dlbench import scenarios

    path = REPO / "tests/data/default_run/runs/training_jax_cnn_cpu_b64_digits_w0_adam_jit.json"
    first = json.loads(path.read_text())
    second = copy.deepcopy(first)
    epoch = second["pipeline"]["first_epoch"]
    epoch |= {"seconds": epoch["seconds"] + 2.0, "images_per_s": epoch["images_per_s"] / 2}
    combined = scenarios.get("training").combine([first, second])["pipeline"]["first_epoch"]
    before = first["pipeline"]["first_epoch"]
    assert combined["seconds"] == pytest.approx(before["seconds"] + 1.0)
    assert combined["images_per_s"] == pytest.approx(before["images_per_s"] * 0.75)
    assert combined["steps"] == before["steps"] and combined["cold"] == before["cold"]
    assert first["pipeline"]["first_epoch"] == before  # the seeds' records left alone
