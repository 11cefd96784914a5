"""JAX inference: transformers' Flax classes (BERT, RoBERTa, DistilBERT, GPT-2), the weights
as arguments of the forward pass.

Recipes:
- `eager`: JAX's default without jax.jit. Flax runs the model op by op from Python; each
  operation dispatches its own small XLA executable (compiled once per shape and type, then
  cached), and the library's helpers that are themselves jitted (softmax, GELU) run as
  small compiled programs that transformers 4.57's Flax classes trace again on every call
  (about 40 traces per BERT call, counted with jax.monitoring). Not `jax.disable_jit()`,
  a debugging mode that is slower still.
- `jit`: jax.jit of the whole forward pass: XLA compiles it at the first call.

Precisions: bf16 and fp16 are the Flax modules' computation `dtype` (the weights stay
float32, as under a Keras mixed-precision policy); tf32 is the backend's matmul precision.
The Flax classes have one attention implementation, the explicit one (matmul, the mask as
a bias, softmax, matmul), which applies the mask in every recipe.
"""

# The backend first: it sets the environment that transformers and JAX read when they
# load.
from dlbench.frameworks.jax.backend import JaxBackend  # isort: split

from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace

import jax
import jax.numpy as jnp
import numpy as np
import transformers

from dlbench.catalogue.models import ModelSpec
from dlbench.catalogue.recipes import Optimization
from dlbench.frameworks.jax.about import FRAMEWORK

_DTYPES = {"bf16": jnp.bfloat16, "fp16": jnp.float16}
# Primitives that move, view, convert or create arrays without computing on them: left out
# of the record of which operations computed in which type.
_MOVEMENT = frozenset({
    "convert_element_type", "reshape", "transpose", "broadcast_in_dim", "squeeze",
    "expand_dims", "slice", "dynamic_slice", "concatenate", "iota", "copy", "copy_p",
    "gather", "select_n", "pjit", "jit", "custom_jvp_call", "custom_vjp_call", "stop_gradient",
    "split", "pad", "rev",
})


class Model:
    """A Flax model and its weights on the device."""

    def __init__(self, flax_model, params):
        self.flax_model = flax_model
        self.params = params

    def forward(self, params, input_ids, attention_mask):
        return self.flax_model(input_ids, attention_mask=attention_mask,
                               params=params).last_hidden_state


class JaxInference:
    recipes: dict[str, Callable]  # bound to the instance: the jit recipe keeps its function

    def __init__(self, backend: JaxBackend):
        self.backend = backend
        self._jitted = None
        self.recipes = {"eager": self._eager, "jit": self._jit}

    def _eager(self, model: Model, inputs: dict, optimization: Optimization):
        hold = self.backend.hold
        return lambda: hold(model.forward(model.params, **inputs))

    def _jit(self, model: Model, inputs: dict, optimization: Optimization):
        # The weights and inputs are arguments, not constants a compiler could fold.
        forward = self._jitted = jax.jit(model.forward)
        hold = self.backend.hold
        return lambda: hold(forward(model.params, **inputs))

    def build(self, spec: ModelSpec, seed: int, optimization: Optimization,
              weights: Path | None = None, attention: str = "sdpa") -> Model:
        """The model on the device: the weights of a safetensors file written by
        `dlbench.reference` (PyTorch's, read without torch) if given, else random from the
        seed. (`attention` has no choice here: see the module's note.)"""
        config = getattr(transformers, spec.classes.config_class)(**spec.params)
        dtype = _DTYPES.get(optimization.precision.name, jnp.float32)
        flax_model = getattr(transformers, FRAMEWORK.model_class(spec.family))(
            config, seed=seed, dtype=dtype, _do_init=False)
        params = (random_params(flax_model) if weights is None
                  else _load_pytorch_weights(flax_model, Path(weights)))
        params = jax.block_until_ready(jax.device_put(params, self.backend.device))
        return Model(flax_model, params)

    def inputs(self, token_ids: np.ndarray) -> dict:
        ids = jax.device_put(np.asarray(token_ids, dtype=np.int32), self.backend.device)
        return {"input_ids": ids, "attention_mask": jnp.ones_like(ids)}

    def to_numpy(self, output) -> np.ndarray:
        return np.asarray(output.astype(jnp.float32))

    def versions(self) -> dict[str, str]:
        return {"transformers": transformers.__version__}

    def same_attention_work(self, model: Model, inputs: dict) -> None:
        """Nothing to do: every recipe runs the same explicit attention with its mask."""

    def attention(self, model: Model) -> dict:
        return {"implementation": "eager", "mask_applied": True,
                "implementation_of": "transformers (Flax classes)"}

    def compilation(self) -> dict | None:
        """jit: the programs XLA compiled for the forward pass (one: the shapes never
        change) and those compiled again after the first; None for eager."""
        if self._jitted is None:
            return None
        programs = self._jitted._cache_size()
        return {"graphs": programs, "graph_breaks": 0, "recompiles": max(0, programs - 1),
                "method": "jax.jit's cache of compiled programs of the forward pass"}

    def precision_ops(self, model: Model, inputs: dict, optimization: Optimization) -> dict:
        """Which operations compute in float32 and which in the reduced type, from the
        jaxpr of the forward pass (the recipe does not change the modules' choices)."""
        reduced = jnp.dtype(_DTYPES[optimization.precision.name])
        seen: dict = {jnp.dtype(jnp.float32): set(), reduced: set()}
        closed = jax.make_jaxpr(model.forward)(model.params, **inputs)
        for eqn in _equations(closed.jaxpr):
            if eqn.primitive.name in _MOVEMENT:
                continue
            for out in eqn.outvars:
                dtype = getattr(out.aval, "dtype", None)
                if dtype in seen:
                    seen[dtype].add(eqn.primitive.name)
        return {"float32_ops": sorted(seen[jnp.dtype(jnp.float32)]),
                "reduced_ops": sorted(seen[reduced]),
                "method": "jaxpr primitives by the floating-point type of their outputs, "
                          "from the forward pass traced with the Flax modules' dtype "
                          "(conversions, reshapes and copies left out)"}

    def release(self) -> None:
        """Forget compiled programs, so that the next cell of a group compiles afresh."""
        self._jitted = None
        jax.clear_caches()


def _equations(jaxpr):
    """Every equation of a jaxpr and of the jaxprs inside it (jit, custom derivatives)."""
    for eqn in jaxpr.eqns:
        yield eqn
        for value in eqn.params.values():
            for inner in value if isinstance(value, list | tuple) else (value,):
                inner = getattr(inner, "jaxpr", inner)  # a ClosedJaxpr's Jaxpr
                if hasattr(inner, "eqns"):
                    yield from _equations(inner)


def random_params(flax_model) -> dict:
    """The parameters that the Flax class draws from its seed with `_do_init=True`, drawn
    by one compiled program: the class's own initialization runs the model op by op, 1.5-2.4
    s of CPU more in a tiny-bert cell on a 2-core AMD EPYC (docs/measurements.md). The same
    draws, to within one float32 rounding: the program fuses their scaling
    (tests/test_jax_random_weights.py)."""
    init = jax.jit(flax_model.init_weights, static_argnums=1)
    return init(flax_model.key, flax_model.input_shape)


def _load_pytorch_weights(flax_model, weights: Path) -> dict:
    """PyTorch's safetensors weights as the Flax model's parameters, without importing
    torch; every parameter must come from the file, with its shape."""
    from flax.traverse_util import flatten_dict
    from safetensors.numpy import load_file
    from transformers.modeling_flax_pytorch_utils import convert_pytorch_state_dict_to_flax

    # The parameters' shapes without computing them: what the converter checks against.
    shapes = jax.eval_shape(lambda: flax_model.init_weights(jax.random.PRNGKey(0), (1, 1)))
    target = SimpleNamespace(params=shapes, base_model_prefix=flax_model.base_model_prefix)
    params = convert_pytorch_state_dict_to_flax(load_file(weights), target)
    wanted, found = set(flatten_dict(shapes)), set(flatten_dict(params))
    if wanted != found:
        raise ValueError(f"{weights} does not fit {type(flax_model).__name__}: missing "
                         f"{sorted(wanted - found)}, unexpected {sorted(found - wanted)}")
    return params


def make_ops(backend: JaxBackend) -> JaxInference:
    return JaxInference(backend)
