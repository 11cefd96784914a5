"""JAX's greedy generation on the CPU, transformers' Flax GPT-2 as it is against dlbench's
decoder layers that contract their kernels in place (dlbench.frameworks.jax.generation):
the time of a whole generation and per token, side by side, each way in a process of its
own, and whether they generate the same ids.

    .venv/bin/python bench/jax_decoding.py [--model distilgpt2] [--threads 2] [--calls 5]

Best of `--calls` generations after the compiling one (a neighbour's load only slows a
call; run it on an idle machine). Random weights from the seed; batch 1, a 32-token prompt,
32 new tokens, as the default matrix's generation slice.
"""

import argparse
import json
import subprocess
import sys

WAY = """
import json, sys, time
import numpy as np
from dlbench.catalogue import recipes
from dlbench.catalogue.models import get_model
from dlbench.frameworks import load_backend, load_ops
from dlbench.scenarios.inference import token_ids

way, model_name, threads, calls = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
ops = load_ops(load_backend("jax", "cpu", threads, 1), "generation")
ops.kernels_in_place = way == "in-place"
jit = recipes.optimization("generation", "jit", "jax")
spec = get_model(model_name)
model = ops.build(spec, 0, jit)
decoder = ops.decoder(model, ops.inputs(token_ids(spec, 1, 32, 0)), 32, jit)
sync = ops.backend.synchronize
start = time.perf_counter()
ids = decoder.call()
sync()
first = time.perf_counter() - start
times = []
for _ in range(calls):
    start = time.perf_counter()
    decoder.call()
    sync()
    times.append(time.perf_counter() - start)
print(json.dumps({"first_s": first, "best_ms": min(times) * 1e3,
                  "ids": np.asarray(ids).tolist()}))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="distilgpt2")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--calls", type=int, default=5)
    args = parser.parse_args()
    found = {}
    for way in ("as-is", "in-place"):
        done = subprocess.run([sys.executable, "-c", WAY, way, args.model, str(args.threads),
                               str(args.calls)], capture_output=True, text=True, check=True)
        found[way] = json.loads(done.stdout.strip().splitlines()[-1])
        print(f"{way:8} first call (compiling) {found[way]['first_s']:5.1f} s, a generation "
              f"{found[way]['best_ms']:7.0f} ms, {found[way]['best_ms'] / 32:6.1f} ms a token")
    same = found["as-is"]["ids"] == found["in-place"]["ids"]
    print(f"as-is / in-place: {found['as-is']['best_ms'] / found['in-place']['best_ms']:.2f}×; "
          f"the same ids: {same}")


if __name__ == "__main__":
    main()
