"""The time to the first token as dlbench defines it in every framework — generate()'s first
step timed on its own (the decoder's `first`: the prompt's forward pass with generate's
key-value cache and the greedy choice, dlbench.scenarios.generation.FIRST_TOKEN) — against a
one-token generate() of the same recipe, timed alternately in one process, per framework
and recipe; and the first token inside the whole generation, from the steps' stamps, where
the framework exposes them.

    .venv/bin/python bench/first_token.py [--model distilgpt2] [--threads 2] [--calls 15]
        [--frameworks pytorch tensorflow jax]

TensorFlow's one-token generate() cannot run under tf.function in transformers 4.57 (a
negative padding of its cache): its xla row has no one-token generation. Medians of
`--calls` alternated calls after two untimed ones; random weights from the seed; batch 1,
a 32-token prompt, 32 new tokens, as the default matrix's generation slice; JAX's one-token
generate() computes its head on the last position only, as dlbench's recipe does. Run it on
an idle machine.
"""

import argparse
import json
import subprocess
import sys

CELLS = {"pytorch": ["eager", "static-cache", "compile"], "tensorflow": ["eager", "xla"],
         "jax": ["jit"]}

FRAMEWORK = """
import json, statistics, sys, time
import numpy as np
from dlbench.catalogue import recipes
from dlbench.catalogue.models import get_model
from dlbench.frameworks import load_backend, load_ops
from dlbench.scenarios.generation import step_times
from dlbench.scenarios.inference import token_ids

framework, model_name, threads, calls = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
ops = load_ops(load_backend(framework, "cpu", threads, 1), "generation")
sync = ops.backend.synchronize
spec = get_model(model_name)
found = {}
for name in sys.argv[5:]:
    recipe = recipes.optimization("generation", name, framework)
    model = ops.build(spec, 0, recipe)
    inputs = ops.inputs(token_ids(spec, 1, 32, 0))
    decoder = ops.decoder(model, inputs, 32, recipe)
    one = None  # a one-token generate() of the same recipe, where it runs
    if framework == "pytorch":
        import torch
        options = {"do_sample": False, "max_new_tokens": 1, "min_new_tokens": 1,
                   "pad_token_id": 0, "disable_compile": True}
        if name != "eager":
            options["cache_implementation"] = "static"
        def one():
            with torch.inference_mode():
                return model.generate(**inputs, **options)
    elif framework == "tensorflow" and name == "eager":
        def one():
            return model.generate(**inputs, do_sample=False, max_new_tokens=1,
                                  min_new_tokens=1, pad_token_id=0)
    elif framework == "jax":
        import jax
        import flax.linen as nn
        from dlbench.frameworks.jax.generation import _head_on_last_position
        flax_model = model.flax_model
        @jax.jit
        def generate_one(params, input_ids, attention_mask):
            # the head on the last position, as dlbench's recipe runs it
            with nn.intercept_methods(_head_on_last_position):
                return flax_model.generate(input_ids, attention_mask=attention_mask,
                                           params=params, do_sample=False, max_new_tokens=1,
                                           pad_token_id=0).sequences
        def one():
            return ops.backend.hold(generate_one(model.params, **inputs))
    ways = {"first step (dlbench)": decoder.first, "whole generation": decoder.call}
    if one is not None:
        ways["one-token generate()"] = one
    times = {way: [] for way in ways}
    stamps = []
    for turn in range(calls + 2):
        for way, call in ways.items():
            start = time.perf_counter()
            call()
            sync()
            if turn >= 2:
                times[way].append((time.perf_counter() - start) * 1e3)
                if way == "whole generation" and decoder.stamps is not None:
                    stamps.append((start, decoder.stamps()))
    row = {way: statistics.median(t) for way, t in times.items()}
    if stamps:
        row["first token inside generate (stamps)"] = step_times(stamps)["first"]["median_ms"]
    found[name] = row
    ops.release()
print(json.dumps(found))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="distilgpt2")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--calls", type=int, default=15)
    parser.add_argument("--frameworks", nargs="+", choices=list(CELLS), default=list(CELLS))
    args = parser.parse_args()
    print(f"{args.model}, batch 1, prompt 32, 32 new tokens, {args.threads} threads; "
          f"medians of {args.calls} alternated calls (ms)")
    for framework in args.frameworks:
        recipes = CELLS[framework]
        done = subprocess.run([sys.executable, "-c", FRAMEWORK, framework, args.model,
                               str(args.threads), str(args.calls), *recipes],
                              capture_output=True, text=True)
        if done.returncode != 0:
            print(f"{framework}: failed\n{done.stderr[-2000:]}")
            continue
        for recipe, row in json.loads(done.stdout.strip().splitlines()[-1]).items():
            first, one = row["first step (dlbench)"], row.get("one-token generate()")
            against = f", one-token generate() {one:.1f} ({first / one:.2f}×)" if one else ""
            inside = row.get("first token inside generate (stamps)")
            stamped = f", inside generate {inside:.1f}" if inside else ""
            print(f"{framework} {recipe}: first step {first:.1f}{against}{stamped}; "
                  f"whole {row['whole generation']:.1f}")


if __name__ == "__main__":
    main()
