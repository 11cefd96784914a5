"""JAX, as the harness knows it without importing jax."""

from types import MappingProxyType

from dlbench.catalogue.frameworks import Framework, GemmLibrary

FRAMEWORK = Framework(
    name="jax",
    label="JAX",
    color="tab:green",
    environment="envs/jax.yaml",
    distributions=("jax", "jaxlib", "flax", "optax", "grain"),
    # transformers 4.57's Flax classes; XLNet and XLM have none.
    model_classes=MappingProxyType({
        "bert": "FlaxBertModel",
        "distilbert": "FlaxDistilBertModel",
        "gpt2": "FlaxGPT2Model",
        "roberta": "FlaxRobertaModel",
    }),
    gemm_libraries=(
        GemmLibrary("jax-matmul", "JAX jnp.matmul (jax.jit: XLA)", ("cpu", "gpu"), True),
    ),
    no_fp16=MappingProxyType({
        "distilbert": "transformers 4.57's FlaxDistilBertModel masks attention scores with "
                      "1e30 × (1 − mask), which is inf × 0 = NaN in float16",
    }),
    no_pinned_memory="pinned memory is a PyTorch DataLoader option; Grain has none",
    # A training step in JAX is what jax.jit compiles (op by op is not what anyone runs).
    default_step="jit",
    unused_imports=("sklearn",),  # jax.experimental.sparse imports SciPy
    gpu_timing="on the host only, after block_until_ready: JAX's Python API has no device "
               "events",
    gpu_memory="Device.memory_stats()'s peak in use, and its allocator's pool's peak as "
               "reserved, which JAX cannot reset: in a group of cells, the largest so far",
    mixed_precision="the Flax modules' computation dtype: each module computes in the "
                    "reduced type unless it keeps a computation in float32, its parameters "
                    "stay float32; the ops listed are the primitives of the forward pass's "
                    "jaxpr",
    no_warm_parent="forked after JAX's import, its eager BERT-base cells measured 10% slower "
                   "than in jobs that import it (bench/warm_parent.py, 2026-11-29: warm / cold "
                   "medians 1.101, rounds 1.100-1.137); not yet explained",
)
