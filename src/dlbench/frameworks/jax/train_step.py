"""JAX training steps of the registry's transformers: the Flax model of the inference
operations (PyTorch's shared weights, read without torch), the same language-model loss on a
tied head as the other frameworks, the optimizer of the training scenarios in optax, and the
step as two jitted functions — the gradients (forward with dropout, loss, backward), then
the optimizer update — so that the optimizer step is timed on its own, as TensorFlow's two
tf.functions are. bf16/fp16 are the Flax modules' computation dtype (weights, gradients and
optimizer state float32); fp16 scales the loss dynamically, as PyTorch's GradScaler does.

The parameters and optimizer state are donated to the update, which so writes them in place
as the other frameworks' optimizers do. Every parameter gets its gradient and its update,
also the pooler that the loss does not use (its gradient is zero; PyTorch and TensorFlow
skip it): a few matrices against the model's."""

# The backend first: it sets the environment that transformers and JAX read when they
# load.
from dlbench.frameworks.jax.backend import JaxBackend  # isort: split

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax.traverse_util import flatten_dict

from dlbench.catalogue.models import ModelSpec
from dlbench.catalogue.optimizers import Optimizer
from dlbench.catalogue.recipes import Optimization
from dlbench.frameworks.jax.inference import JaxInference, Model
from dlbench.frameworks.jax.optimizer import INITIAL_SCALE, describe, make_optimizer, scaled_update
from dlbench.measure.parts import StepParts

FORWARD_BACKWARD, OPTIMIZER = "forward_backward", "optimizer"


def _embedding_path(params: dict) -> tuple[str, ...]:
    """Where the word-embedding matrix (vocabulary × width) is in a Flax model's
    parameters: BERT, DistilBERT and RoBERTa's word_embeddings, GPT-2's wte."""
    for path in flatten_dict(params):
        if path[-2:] in (("word_embeddings", "embedding"), ("wte", "embedding")):
            return path
    raise ValueError("no word-embedding matrix among the parameters")


def _at(params: dict, path: tuple[str, ...]):
    for key in path:
        params = params[key]
    return params


def lm_loss(model: Model, params: dict, path: tuple[str, ...], input_ids, attention_mask,
            dropout_rng=None):
    """Mean cross-entropy of the tied language-model head (the last hidden state times the
    word embeddings, transposed) against the input token ids; computed in float32. With a
    dropout key, the model is in training mode (dropout on)."""
    hidden = model.flax_model(input_ids, attention_mask=attention_mask, params=params,
                              dropout_rng=dropout_rng,
                              train=dropout_rng is not None).last_hidden_state
    weight = _at(params, path)
    logits = hidden @ weight.astype(hidden.dtype).T
    losses = optax.softmax_cross_entropy_with_integer_labels(logits.astype(jnp.float32),
                                                            input_ids)
    return losses.mean()


class Trainer:
    """The model's parameters, the optimizer's state and the loss scale between steps."""

    def __init__(self, model: Model, opt: optax.GradientTransformation, optimizer: Optimizer,
                 seed: int, device):
        self.model, self.opt, self.optimizer = model, opt, optimizer
        # On the device, committed, as the steps' outputs that replace them are: an
        # uncommitted scalar is another argument to jax.jit, and both functions compiled
        # again at the first warm-up step (2.7 s on the CPU for tiny-bert; 12.7 s on an H100
        # for DistilBERT).
        self.opt_state = jax.device_put(opt.init(model.params), device)
        self.rng = jax.device_put(jax.random.PRNGKey(seed), device)
        self.scale = jax.device_put(jnp.float32(INITIAL_SCALE), device)
        self.good_steps = jax.device_put(jnp.int32(0), device)


class JaxTrainStep:
    def __init__(self, backend: JaxBackend):
        self.backend = backend
        self.models = JaxInference(backend)  # build (the shared weights) and inputs
        self._seed = 0  # the cell's, from build: the dropout keys start from it
        self._jitted: list = []  # the step's jitted functions, for compilation()

    # -- model, inputs and optimizer ---------------------------------------------------------

    def build(self, spec: ModelSpec, seed: int, optimization: Optimization,
              weights=None) -> Model:
        """The model on the device, its modules in the cell's precision."""
        model = self.models.build(spec, seed, optimization, weights)
        self._seed = seed
        return model

    def inputs(self, token_ids: np.ndarray) -> dict:
        return self.models.inputs(token_ids)

    def optimizer(self, model: Model, optimizer: Optimizer, learning_rate: float,
                  optimization: Optimization) -> Trainer:
        return Trainer(model, make_optimizer(optimizer, learning_rate), optimizer, self._seed,
                       self.backend.device)

    def implementation(self, opt: Trainer, optimization: Optimization) -> str:
        """Which implementation of the update runs, in words."""
        return (f"{describe(opt.optimizer)}: jax.numpy operations over the parameter "
                "tree, compiled by XLA under jax.jit (no Python per step), parameters and "
                "state updated in place (donated buffers)")

    def word_embeddings(self, model: Model) -> np.ndarray:
        # A copy: the update writes the parameters' buffers in place.
        return np.array(_at(model.params, _embedding_path(model.params)))

    def initial_loss(self, model: Model, inputs: dict,
                     optimization: Optimization) -> float:
        """The loss before training, dropout off, in the cell's precision."""
        path = _embedding_path(model.params)
        loss = jax.jit(lambda params, ids, mask: lm_loss(model, params, path, ids, mask))
        return float(loss(model.params, inputs["input_ids"], inputs["attention_mask"]))

    # -- the step ----------------------------------------------------------------------------

    def train_step(self, model: Model, opt: Trainer, inputs: dict,
                   optimization: Optimization) -> StepParts:
        """The step in parts: the gradients (the loss, an array, not read), then the
        optimizer update."""
        trainer = opt  # the optimizer and its state
        path, opt = _embedding_path(model.params), trainer.opt
        scaled = optimization.precision.name == "fp16"

        def gradients(params, ids, mask, rng, scale):
            rng, dropout = jax.random.split(rng)

            def target(p):
                loss = lm_loss(model, p, path, ids, mask, dropout)
                return loss * scale if scaled else loss, loss

            grads, loss = jax.grad(target, has_aux=True)(params)
            return loss, grads, rng

        def update(grads, opt_state, params, scale, good_steps):
            if scaled:
                return scaled_update(opt, grads, opt_state, params, scale, good_steps)
            updates, opt_state = opt.update(grads, opt_state, params)
            return optax.apply_updates(params, updates), opt_state, scale, good_steps

        gradients = jax.jit(gradients)
        update = jax.jit(update, donate_argnums=(1, 2))
        self._jitted = [gradients, update]
        ids, mask = inputs["input_ids"], inputs["attention_mask"]
        hold = self.backend.hold
        handed: list = []  # the gradients, from one part to the next

        def forward_backward():
            loss, grads, trainer.rng = gradients(model.params, ids, mask, trainer.rng,
                                                 trainer.scale)
            handed[:] = [grads]
            return hold((loss, grads))[0]

        def optimizer_step():
            model.params, trainer.opt_state, trainer.scale, trainer.good_steps = hold(update(
                handed.pop(), trainer.opt_state, model.params, trainer.scale,
                trainer.good_steps))

        how = ("the gradients (forward with dropout, loss, backward: jax.grad), then the "
               "optax update" + (" with dynamic loss scaling" if scaled else "")
               + ", as two jax.jit functions: split so that the optimizer step is timed on "
               "its own (one function for both could overlap or fuse them)")
        return StepParts({FORWARD_BACKWARD: forward_backward, OPTIMIZER: optimizer_step}, how)

    def losses(self, outputs: list) -> list[float]:
        """The losses the steps returned, as numbers (read once, after the loop)."""
        return np.asarray(jnp.stack(outputs), dtype=np.float64).tolist() if outputs else []

    def versions(self) -> dict[str, str]:
        return {**self.models.versions(), "optax": optax.__version__}

    def compilation(self) -> dict | None:
        """The programs XLA compiled for each of the step's two functions: one each, by
        design; a second is a retrace (an argument of another type, shape or placement)."""
        if not self._jitted:
            return None
        programs = [function._cache_size() for function in self._jitted]
        return {"graphs": max(programs), "graph_breaks": 0,
                "recompiles": sum(max(0, n - 1) for n in programs),
                "method": "jax.jit's caches of the step's two functions (gradients, then the "
                          "update): programs beyond one each are recompilations"}

    def release(self) -> None:
        self._jitted = []
        self.models.release()


def make_ops(backend: JaxBackend) -> JaxTrainStep:
    return JaxTrainStep(backend)
