"""What keeping the weights in float32 costs a bf16 generation: Flax DistilGPT-2 (random
weights) under jax.jit, greedy, one process, side by side: fp32; the modules computing in
bfloat16 with float32 weights (cast at every call); the same with the weights cast once.

    .venv/bin/python bench/bf16_weights.py [--prompt 32] [--new-tokens 32] [--threads 2]

Prints the median time to the first token (the prompt's forward pass with its cache, and
its argmax) and of the whole generation, over 7 and 5 calls after two warm ones.
"""

import argparse
import os
import statistics
import time

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("--prompt", type=int, default=32)
parser.add_argument("--new-tokens", type=int, default=32)
parser.add_argument("--threads", type=int, default=2)
args = parser.parse_args()
os.environ.update(USE_TORCH="0", USE_TF="0", TF_CPP_MIN_LOG_LEVEL="2", HF_HUB_OFFLINE="1",
                  PJRT_NPROC=str(args.threads))

import jax  # noqa: E402  (after the environment it reads)
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import transformers  # noqa: E402

config = transformers.GPT2Config(n_layer=6)  # distilgpt2's shape
ids = jnp.asarray(np.random.RandomState(0).randint(0, config.vocab_size, (1, args.prompt)),
                  jnp.int32)
mask = jnp.ones_like(ids)


def median_ms(function, *arguments, calls: int) -> float:
    for _ in range(2):
        jax.block_until_ready(function(*arguments))
    times = []
    for _ in range(calls):
        start = time.perf_counter()
        jax.block_until_ready(function(*arguments))
        times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times)


for name, dtype, cast in [("fp32", jnp.float32, False),
                          ("bf16, float32 weights", jnp.bfloat16, False),
                          ("bf16, bf16 weights", jnp.bfloat16, True)]:
    model = transformers.FlaxGPT2LMHeadModel(config, seed=0, dtype=dtype)
    params = model.to_bf16(model.params) if cast else model.params

    @jax.jit
    def first(params, ids, mask, model=model):
        cache = model.init_cache(1, args.prompt)
        positions = jnp.arange(args.prompt)[None, :]
        out = model(ids, attention_mask=mask, params=params, position_ids=positions,
                    past_key_values=cache)
        return jnp.argmax(out.logits[:, -1], -1)

    @jax.jit
    def whole(params, ids, mask, model=model):
        return model.generate(ids, attention_mask=mask, params=params, do_sample=False,
                              max_new_tokens=args.new_tokens, min_new_tokens=args.new_tokens,
                              eos_token_id=None, pad_token_id=config.eos_token_id).sequences

    print(f"{name:22s} first token {median_ms(first, params, ids, mask, calls=7):7.1f} ms"
          f"   whole {median_ms(whole, params, ids, mask, calls=5):7.1f} ms", flush=True)
