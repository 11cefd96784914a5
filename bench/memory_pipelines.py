"""How long each framework's `memory` pipeline takes to hand over one batch (gathered from
the decoded set on the device, cropped, flipped, normalised), on the synthetic set at batch
64, each framework in a process of its own with the same threads; and JAX's pipeline as it
was before 2026-11-30 (its dozen operations dispatched one by one) beside it.

    .venv/bin/python bench/memory_pipelines.py [--threads 2] [--device cpu] [--epochs 5]

Prints each pipeline's median time per batch over the epochs' batches, in ms. On an H200
(2026-11-30, dlbench's records): JAX's op-by-op batch waited 7.2 ms of a 10-ms step,
PyTorch's 0.7 ms. On a 2-core Xeon (2026-11-30, --threads 2): PyTorch 1.1-1.3 ms;
TensorFlow 4.2 op by op, 3.4 as one tf.function; JAX 4.0-4.5 op by op, 0.43-0.46 jitted.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

PIPELINE = """
import json, statistics, time
import numpy as np
from dlbench.data import read_manifest
from dlbench.data.pipeline import parse
from dlbench.frameworks import load_backend, load_ops

backend = load_backend({framework!r}, {device!r}, {threads}, 1)
ops = load_ops(backend, "training")
manifest = read_manifest({manifest!r})
if {old!r}:
    from bench_old_jax import op_by_op
    epoch = op_by_op(ops, manifest, 64, 0)
else:
    epoch = ops.pipeline(manifest, parse("memory"), 64, 0)
times = []
for e in range({epochs}):
    start = time.perf_counter()
    for batch in epoch(e):
        backend.synchronize()
        times.append((time.perf_counter() - start) * 1e3)
        start = time.perf_counter()
print(json.dumps({{"batches": len(times), "median_ms": statistics.median(times[1:])}}))
"""

# JAX's memory pipeline before 2026-11-30: the same operations, each dispatched on its own.
OLD_JAX = '''
import jax, jax.numpy as jnp, numpy as np
from dlbench.data import decode
from dlbench.data.pipeline import PAD

def op_by_op(ops, manifest, batch, seed):
    images, labels = decode(manifest, "train")
    rng = np.random.default_rng(seed)
    n, side, device = len(labels), images.shape[1], ops.device
    data = jax.device_put(images, device)
    targets = jax.device_put(labels.astype(np.int32), device)
    mean = jax.device_put(np.asarray(manifest["mean"], np.float32) * 255, device)
    std = jax.device_put(np.asarray(manifest["std"], np.float32) * 255, device)
    steps = np.arange(side)

    def epoch(_):
        order = rng.permutation(n)
        for start in range(0, n - batch + 1, batch):
            index = jax.device_put(order[start:start + batch], device)
            offsets = rng.integers(0, 2 * PAD + 1, size=(batch, 2))
            flips = jax.device_put((rng.random(batch) < 0.5) & manifest["flip"], device)
            x = jnp.pad(data[index], ((0, 0), (PAD, PAD), (PAD, PAD), (0, 0)))
            rows = jax.device_put(offsets[:, :1] + steps, device)
            cols = jax.device_put(offsets[:, 1:] + steps, device)
            b = jnp.arange(batch)[:, None, None]
            x = x[b, rows[:, :, None], cols[:, None, :]]
            x = jnp.where(flips[:, None, None, None], x[:, :, ::-1], x)
            yield jax.block_until_ready(((x.astype(jnp.float32) - mean) / std, targets[index]))
    return epoch
'''


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--epochs", type=int, default=5)
    args = parser.parse_args()
    from dlbench.data import __main__ as data_cli

    with tempfile.TemporaryDirectory() as tmp:
        manifest = data_cli.build("synthetic", Path(tmp) / "synthetic", 1438, 64, 0)
        (Path(tmp) / "bench_old_jax.py").write_text(OLD_JAX)
        for name, framework, old in (("pytorch", "pytorch", False),
                                     ("tensorflow", "tensorflow", False),
                                     ("jax (one jitted function)", "jax", False),
                                     ("jax (op by op, before)", "jax", True)):
            code = PIPELINE.format(framework=framework, device=args.device,
                                   threads=args.threads, epochs=args.epochs, old=old,
                                   manifest=str(manifest))
            done = subprocess.run([sys.executable, "-c", code], capture_output=True,
                                  text=True, cwd=tmp,
                                  env={**os.environ, "PYTHONPATH": os.pathsep.join(
                                      filter(None, [tmp, str(Path.cwd() / "src"),
                                                    os.environ.get("PYTHONPATH")]))})
            if done.returncode:
                sys.exit(f"{name}: {done.stderr[-2000:]}")
            found = json.loads(done.stdout.strip().splitlines()[-1])
            print(f"{name:28} {found['median_ms']:7.3f} ms a batch "
                  f"({found['batches']} batches)")


if __name__ == "__main__":
    main()
