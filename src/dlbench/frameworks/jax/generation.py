"""JAX text generation: transformers' Flax causal-LM classes and their `generate()`,
greedy, a fixed number of new tokens, under jax.jit with the weights as arguments (`jit`:
XLA compiles the prompt and every decoding step into one program at the first call), in
fp32 or in bfloat16: the weights cast once, as PyTorch's model in bfloat16, and the Flax
modules computing in it (left in float32, the modules cast every weight at every call:
`bench/bf16_weights.py`, distilgpt2 b1 p32, 32 new tokens, two runs: 134-140 ms to the
first token against 104-106 ms, a generation 0.5-4% slower). Generation is one compiled
call: the first token is timed by the prompt's forward pass and its greedy choice, jitted
alike.

On a CPU transformers' Flax GPT-2 as it is spends its decoding steps copying weights, not
computing: its FlaxConv1D layers transpose their kernel in every call (`kernel.transpose()`
before a dot_general that contracts the kernel's first axis), and XLA materializes those
transposes inside generate's while loop, so each decoding step copied every weight matrix
(distilgpt2, b1, 32 + 32 tokens, 2 threads: 2.67 s a generation, 83 ms a token). The same
product contracts the kernel's second axis where it lies: `_KernelInPlace`, which the
ops put in FlaxConv1D's place while a cell runs (the same ids: 628 ms a generation, 19.6 ms
a token). The tied head's `embedding.T` stays, one copy of the word embeddings a step
(config/README.md, *Text generation*; a test pins both).

The language-model head runs on the last position only (`_head_on_last_position`), the one
generate chooses a token from, as PyTorch's generate asks of its model (logits_to_keep=1):
transformers' Flax head multiplies every position of the prompt, and XLA does not cut the
product down to the slice generate keeps (distilgpt2, a 32-token prompt: a 32 × 50257
product in the first token's program, 2.4 GFLOP more than PyTorch's)."""

# The backend first: it sets the environment that transformers and JAX read when they
# load.
from dlbench.frameworks.jax.backend import JaxBackend  # isort: split

import contextlib
from pathlib import Path

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import transformers
from transformers.models.gpt2 import modeling_flax_gpt2

from dlbench.catalogue.models import ModelSpec
from dlbench.catalogue.recipes import Optimization
from dlbench.frameworks.jax.inference import _DTYPES, Model, _load_pytorch_weights, random_params
from dlbench.measure.decoder import HEAD_ON_LAST_POSITION, Decoder

# The causal-LM class of each decoder family (its head tied to the word embeddings).
LM_CLASSES = {"gpt2": "FlaxGPT2LMHeadModel"}


class _KernelInPlace(modeling_flax_gpt2.FlaxConv1D):
    """transformers' FlaxConv1D (a dense layer whose kernel is stored (out, in)) with its
    product contracting the kernel's `in` axis where it lies, instead of transposing the
    kernel first: the same parameters and the same sums, without a copy of the kernel in
    every call (which XLA on the CPU makes in every decoding step)."""

    @nn.compact
    def __call__(self, inputs):
        inputs = jnp.asarray(inputs, self.dtype)
        kernel = self.param("kernel", jax.nn.initializers.normal(stddev=0.02),
                            (self.features, inputs.shape[-1]))
        contract = (((inputs.ndim - 1,), (1,)), ((), ()))
        y = jax.lax.dot_general(inputs, jnp.asarray(kernel, self.dtype), contract,
                                precision=self.precision)
        if self.use_bias:
            y = y + jnp.asarray(self.param("bias", jax.nn.initializers.zeros,
                                           (self.features,)), self.dtype)
        return y


def _head_on_last_position(next_fun, args, kwargs, context):
    """A flax.linen method interceptor: the head (the module named lm_head, tied or not)
    given the last position's hidden state alone, so that its logits are (batch, 1, vocab)
    and generate's `logits[:, -1]` picks the same token from them."""
    if context.module.name == "lm_head" and context.method_name == "__call__":
        args = (args[0][:, -1:], *args[1:])
    return next_fun(*args, **kwargs)


class JaxGeneration:
    # Decoder layers contracting their kernels in place (see the module); False: the
    # transformers class as it is (a test compares the two programs).
    kernels_in_place = True
    # The head on the last position only (see the module); False: on every position, as
    # transformers' class computes it (a test compares the two programs).
    head_on_last_position = True

    def __init__(self, backend: JaxBackend):
        self.backend = backend
        self._jitted = None
        self._layer_class = None

    def build(self, spec: ModelSpec, seed: int, optimization: Optimization,
              weights: Path | None = None, attention: str = "sdpa") -> Model:
        """The causal LM on the device: PyTorch's shared weights of the base model (the
        head is tied to the word embeddings) if given, else random from the seed."""
        config = getattr(transformers, spec.classes.config_class)(**spec.params)
        dtype = _DTYPES.get(optimization.precision.name, jnp.float32)
        if self.kernels_in_place and self._layer_class is None:
            # Flax modules look their layers up when they are bound, at every call: in
            # place until `release`.
            self._layer_class = modeling_flax_gpt2.FlaxConv1D
            modeling_flax_gpt2.FlaxConv1D = _KernelInPlace
        flax_model = getattr(transformers, LM_CLASSES[spec.family])(
            config, seed=seed, dtype=dtype, _do_init=False)
        params = (random_params(flax_model) if weights is None
                  else _load_pytorch_weights(flax_model, Path(weights)))
        if dtype != jnp.float32:  # cast once (as Flax's to_bf16), not by the modules every call
            params = jax.tree.map(lambda w: w.astype(dtype), params)
        params = jax.block_until_ready(jax.device_put(params, self.backend.device))
        return Model(flax_model, params)

    def inputs(self, token_ids: np.ndarray) -> dict:
        ids = jax.device_put(np.asarray(token_ids, dtype=np.int32), self.backend.device)
        return {"input_ids": ids, "attention_mask": jnp.ones_like(ids)}

    def decoder(self, model: Model, inputs: dict, new_tokens: int,
                optimization: Optimization) -> Decoder:
        flax_model, hold = model.flax_model, self.backend.hold
        # Exactly `new_tokens`: given eos_token_id=None, transformers' Flax greedy search
        # falls back to the model's end-of-text id and pads after it (it cannot run
        # without one): the end is an id past the vocabulary, which argmax never picks.
        never = flax_model.config.vocab_size
        options = dict(do_sample=False, num_beams=1, max_new_tokens=new_tokens,
                       min_new_tokens=new_tokens, eos_token_id=never,
                       pad_token_id=flax_model.config.eos_token_id)

        def head():  # entered while jax.jit traces: the programs are made with it
            return (nn.intercept_methods(_head_on_last_position)
                    if self.head_on_last_position else contextlib.nullcontext())

        # The weights and the prompt are arguments, not constants a compiler could fold.
        @jax.jit
        def whole(params, input_ids, attention_mask):
            with head():
                return flax_model.generate(input_ids, attention_mask=attention_mask,
                                           params=params, **options).sequences

        # generate()'s first step as a program of its own: the prompt's forward pass with
        # the cache generate gives it (sized for the whole generation) and the greedy choice.
        @jax.jit
        def first(params, input_ids, attention_mask):
            step = flax_model.prepare_inputs_for_generation(
                input_ids, input_ids.shape[1] + new_tokens, attention_mask=attention_mask)
            with head():
                out = flax_model(input_ids, params=params, **step)
            return jnp.argmax(out.logits[:, -1], axis=-1), out.past_key_values

        self._jitted = whole
        return Decoder(
            call=lambda: hold(whole(model.params, **inputs)),
            first=lambda: hold(first(model.params, **inputs)),
            how="generate() under jax.jit: one XLA program" + (
                f"; {HEAD_ON_LAST_POSITION}" if self.head_on_last_position else ""),
            traces=whole._cache_size,
            call_with=lambda other: hold(whole(model.params, **other)),
            compilations=whole._cache_size,
            counted="XLA programs compiled by the jitted generate (jax.jit's cache)")

    def new_ids(self, output, prompt_length: int) -> np.ndarray:
        return np.asarray(output[:, prompt_length:]).astype(np.int64)

    def attention(self, model: Model) -> dict:
        in_place = self._layer_class is not None
        return {"implementation": "eager", "implementation_of": "transformers (Flax classes)"
                + (", FlaxConv1D's kernels contracted in place (no per-step transpose)"
                   if in_place else "")}

    def compilation(self) -> None:
        return None

    def versions(self) -> dict[str, str]:
        return {"transformers": transformers.__version__}

    def release(self) -> None:
        """Forget compiled programs, so that the next cell of a group compiles afresh."""
        self._jitted = None
        jax.clear_caches()
        if self._layer_class is not None:
            modeling_flax_gpt2.FlaxConv1D = self._layer_class
            self._layer_class = None


def make_ops(backend: JaxBackend) -> JaxGeneration:
    return JaxGeneration(backend)
