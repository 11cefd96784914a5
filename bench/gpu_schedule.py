"""On a GPU: does every training recipe's step follow the learning-rate schedule down to
zero? The check of tests/test_pipelines.py (`..._follows_the_learning_rate_down_to_zero`) on
the device, SGD and Adam, each PyTorch recipe and JAX's jit, from the repository's root:

    python bench/gpu_schedule.py

Prints, per framework, recipe and optimizer, how far the model's logits moved at each of five
updates (a rate falling to zero after three: three moves, then exactly none) and `ok`."""
import json
import sys
import time
import traceback

sys.path.insert(0, "src")  # this checkout, installed or not
import numpy as np

out = {}
try:
    import torch
    out["torch"] = [torch.__version__, torch.version.cuda, torch.cuda.is_available(),
                    torch.cuda.get_device_name(0) if torch.cuda.is_available() else None]
except Exception as exc:  # noqa: BLE001
    out["torch"] = repr(exc)


def check(framework, recipes, optimizers=("sgd", "adam")):
    from dlbench.catalogue.models.vision import MODELS, initial_weights
    from dlbench.catalogue.optimizers import OPTIMIZERS, LearningRate
    from dlbench.catalogue.recipes import optimization
    from dlbench.frameworks import load_backend, load_ops
    from dlbench.measure.training import run_step
    backend = load_backend(framework, "gpu", 4, 1)
    ops = load_ops(backend, "training")
    spec = MODELS["tiny-cnn"]
    rng = np.random.default_rng(0)
    images = rng.integers(0, 255, (16, 32, 32, 3), dtype=np.uint8)
    manifest = {"mean": [0.5, 0.5, 0.5], "std": [0.25, 0.25, 0.25]}
    nchw = framework == "pytorch"
    x = ((images.astype(np.float32) / 255 - 0.5) / 0.25)
    x = x.transpose(0, 3, 1, 2).copy() if nchw else x
    y = rng.integers(0, 10, 16).astype(np.int32 if framework != "pytorch" else np.int64)
    batch = (torch.from_numpy(x), torch.from_numpy(y)) if nchw else (x, y)
    found = {}
    for name in recipes:
        for opt_name in optimizers:
            key = f"{framework} {name} {opt_name}"
            try:
                start = time.time()
                recipe = optimization("training", name, framework)
                model = ops.build(spec, initial_weights(spec, 0), recipe)
                # Full, full, half, then zero; Adam's steps are the rate itself (0.05 sent
                # the logits hundreds apart and fp16's gradients to inf: steps skipped).
                rate = LearningRate(0.05 if opt_name == "sgd" else 0.001, 3, 2)
                opt = ops.optimizer(model, OPTIMIZERS[opt_name], rate, recipe)
                step = ops.train_step(model, opt, recipe)
                xy = step.to_device(batch)
                logits = [ops.logits(model, images, manifest)]
                for _ in range(5):
                    run_step(step, *xy, step.separable, backend.synchronize)
                    logits.append(ops.logits(model, images, manifest))
                changes = [float(np.abs(b - a).max())
                           for a, b in zip(logits, logits[1:], strict=False)]
                compiled = ops.compilation()
                ok = all(c > 1e-4 for c in changes[:3]) and changes[3:] == [0.0, 0.0]
                counts = ("graphs", "graph_breaks", "recompiles")
                found[key] = {"changes": changes, "ok": ok, "s": round(time.time() - start, 1),
                              "compilation": compiled and {k: compiled.get(k) for k in counts}}
            except Exception:  # noqa: BLE001
                found[key] = traceback.format_exc()[-1500:]
            finally:
                ops.release()
    return found


RECIPES = {"pytorch": ["eager", "foreach", "fused", "compile", "compile-step", "eager-bf16",
                       "eager-fp16"],
           "jax": ["jit", "jit-bf16"]}
for framework, recipes in RECIPES.items():
    try:
        out[framework] = check(framework, recipes)
    except Exception:  # noqa: BLE001
        out[framework] = traceback.format_exc()[-2000:]
    print(json.dumps({framework: out[framework]}, indent=1), flush=True)
print(json.dumps(out.get("torch")))
