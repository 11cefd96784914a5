"""JAX's recipes, declared for dlbench.catalogue.recipes (implemented in the scenario modules
beside this one). A light module: it imports no framework."""

from dlbench.catalogue.recipes import EAGER_INFERENCE, GENERATION, INFERENCE, TRAINING, Recipe

RECIPES = (
    # -- inference ---------------------------------------------------------------------------
    EAGER_INFERENCE,  # JAX's default: each operation dispatched on its own
    Recipe("jit", "jax.jit of the Flax model's forward pass, weights as arguments: XLA "
           "compiles it whole at the first call (bf16/fp16: the Flax modules' computation "
           "dtype, weights float32)", INFERENCE, compiled=True),
    # -- training (the CNN's and a transformer's step) ---------------------------------------
    # Only jit: a JAX training step op by op is not what anyone runs, and train_step's JAX
    # operations always compile.
    Recipe("jit", "the training step's functions under jax.jit: XLA (on the CPU the CNN's "
           "convolutions' kernel gradients as GEMMs: XLA:CPU's own take ~4× as long)",
           TRAINING, compiled=True),
    # -- generation ---------------------------------------------------------------------------
    # Only jit: Flax's generate() op by op re-traces its jitted helpers at every step.
    # Protocol 2: exactly new_tokens tokens (before, padding after the end-of-text id); the
    # first token timed as generate's first step, its cache sized for the whole generation.
    Recipe("jit", "generate() of the Flax model under jax.jit, weights as arguments: one XLA "
           "program for the prompt and every decoding step (bf16: the Flax modules' "
           "computation dtype, weights float32)", GENERATION, compiled=True, protocol=2),
)
