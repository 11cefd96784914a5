"""TensorFlow training steps of the registry's transformers: the model of the inference
operations (PyTorch's shared weights, read without torch), the same language-model loss on
a tied head as PyTorch's, the optimizer of the training scenarios, and the step as two
functions — the gradients (forward, loss, backward), then applying them — so that the
optimizer step is timed on its own: eager, or both as tf.function graphs (graph) or XLA
clusters (xla), in float32 or a mixed-precision policy (loss scaling in fp16)."""

# The backend first: it sets the environment that transformers and the framework read
# when they load.
from dlbench.frameworks.tensorflow.backend import TensorFlowBackend  # isort: split

import numpy as np
import tensorflow as tf

from dlbench.catalogue.models import ModelSpec
from dlbench.catalogue.optimizers import Optimizer
from dlbench.catalogue.recipes import Optimization
from dlbench.frameworks.tensorflow.inference import TensorFlowInference
from dlbench.frameworks.tensorflow.optimizer import is_legacy, make_optimizer
from dlbench.measure.parts import StepParts

FORWARD_BACKWARD, OPTIMIZER = "forward_backward", "optimizer"


def word_embeddings(model) -> tf.Variable:
    """The word-embedding matrix (vocabulary × width) of a transformers TF model."""
    layer = model.get_input_embeddings()
    weight = getattr(layer, "weight", None)  # BERT, DistilBERT, RoBERTa, XLNet, XLM
    return weight if weight is not None else layer.embeddings  # GPT-2: a Keras Embedding


def lm_loss(model, weight: tf.Variable, input_ids, attention_mask, training: bool):
    """Mean cross-entropy of the tied language-model head (the last hidden state times the
    word embeddings, transposed) against the input token ids; computed in float32."""
    hidden = model(input_ids=input_ids, attention_mask=attention_mask,
                   training=training).last_hidden_state
    logits = tf.matmul(hidden, tf.cast(weight, hidden.dtype), transpose_b=True)
    losses = tf.nn.sparse_softmax_cross_entropy_with_logits(
        labels=input_ids, logits=tf.cast(logits, tf.float32))
    return tf.reduce_mean(losses)


class _Gradients:
    """Forward, loss and backward; then applying the gradients: two functions, so that the
    optimizer step can be timed apart. Variables without a gradient (a pooler that the loss
    does not use) are left out of both, as PyTorch's optimizers skip parameters whose
    gradient is None."""

    def __init__(self, model, opt):
        self.model, self.opt = model, opt
        self.weight = word_embeddings(model)
        self.scaled = isinstance(opt, tf.keras.mixed_precision.LossScaleOptimizer)
        self.used: list[tf.Variable] = []

    def gradients(self, input_ids, attention_mask):
        with tf.GradientTape() as tape:
            loss = lm_loss(self.model, self.weight, input_ids, attention_mask, training=True)
            target = self.opt.get_scaled_loss(loss) if self.scaled else loss
        variables = self.model.trainable_variables
        grads = tape.gradient(target, variables)
        # Known when the function is traced (or on every eager call): which have a gradient.
        self.used = [v for g, v in zip(grads, variables, strict=True) if g is not None]
        return loss, [g for g in grads if g is not None]

    def apply(self, grads) -> None:
        if self.scaled:  # unscale; the optimizer skips a step with inf/NaN and adapts
            grads = self.opt.get_unscaled_gradients(grads)
        self.opt.apply_gradients(zip(grads, self.used, strict=True))


class TensorFlowTrainStep:
    def __init__(self, backend: TensorFlowBackend):
        self.backend = backend
        self.models = TensorFlowInference(backend)  # build (policy, weights) and inputs

    # -- model, inputs and optimizer ---------------------------------------------------------

    def build(self, spec: ModelSpec, seed: int, optimization: Optimization,
              weights=None):
        """The model on the device, its layers in the cell's precision policy."""
        return self.models.build(spec, seed, optimization, weights)

    def inputs(self, token_ids: np.ndarray) -> dict:
        return self.models.inputs(token_ids)

    def optimizer(self, model, optimizer: Optimizer, learning_rate: float,
                  optimization: Optimization):
        return make_optimizer(optimizer, learning_rate, optimization)

    def implementation(self, opt, optimization: Optimization) -> str:
        """Which implementation of the update runs, in words."""
        inner = getattr(opt, "inner_optimizer", opt)
        adam = isinstance(inner, (tf.keras.optimizers.Adam, tf.keras.optimizers.legacy.Adam))
        kind = "Adam" if adam else type(inner).__name__
        if is_legacy(inner):
            kernel = "ResourceApplyAdam" if adam else "ResourceApplyKerasMomentum"
            name = f"tf.keras.optimizers.legacy.{kind}"
            ops = f"one C++ kernel per variable ({kernel})"
        else:
            name = f"tf.keras.optimizers.{kind}"
            ops = "TensorFlow ops per variable, composed in Python"
        if adam:
            name += " (epsilon added to √v̂, as PyTorch's and optax's)"
        run = {"graph": "traced once into a tf.function graph (no Python per step)",
               "xla": "compiled by XLA with jit_compile (no Python per step)"}.get(
            optimization.recipe.name, "dispatched op by op from Python (eager)")
        return f"{name}: {ops}; {run}"

    def word_embeddings(self, model) -> np.ndarray:
        return word_embeddings(model).numpy()

    def initial_loss(self, model, inputs: dict, optimization: Optimization) -> float:
        """The loss before training, dropout off, in the cell's precision policy."""
        with tf.device(self.backend.device_name):
            return float(lm_loss(model, word_embeddings(model), inputs["input_ids"],
                                 inputs["attention_mask"], training=False))

    # -- the step ----------------------------------------------------------------------------

    def train_step(self, model, opt, inputs: dict, optimization: Optimization) -> StepParts:
        """The step in parts: the gradients (forward, loss, backward; the loss, a tensor,
        not read), then applying them (the optimizer step)."""
        recipe = optimization.recipe.name
        step = _Gradients(model, opt)
        gradients, apply = step.gradients, step.apply
        if recipe in ("graph", "xla"):
            gradients = tf.function(gradients, jit_compile=recipe == "xla")
            apply = tf.function(apply, jit_compile=recipe == "xla")
        ids, mask = inputs["input_ids"], inputs["attention_mask"]
        handed: list = []  # the gradients, from one part to the next

        def forward_backward():
            with tf.device(self.backend.device_name):
                loss, grads = gradients(ids, mask)
            handed[:] = [grads]
            return loss

        def optimizer_step():
            with tf.device(self.backend.device_name):
                apply(handed.pop())

        compiled = {"graph": " as two tf.functions", "xla": " as two XLA-compiled "
                    "tf.functions (jit_compile=True)"}.get(recipe, " eagerly")
        how = (f"the gradients (forward, loss, backward under a GradientTape), then "
               f"apply_gradients{' through the loss-scale optimizer' if step.scaled else ''}"
               f"{compiled}: split so that the optimizer step is timed on its own (one "
               f"function for both could overlap or fuse them)")
        return StepParts({FORWARD_BACKWARD: forward_backward, OPTIMIZER: optimizer_step}, how)

    def losses(self, outputs: list) -> list[float]:
        """The losses the steps returned, as numbers (read once, after the loop)."""
        return tf.cast(tf.stack(outputs), tf.float32).numpy().tolist() if outputs else []

    def versions(self) -> dict[str, str]:
        return self.models.versions()

    def compilation(self) -> None:
        """torch.compile's counters: none in TensorFlow."""
        return None

    def release(self) -> None:
        """Leave the process as the cell found it: empty Keras state, float32 policy."""
        self.models.release()


def make_ops(backend: TensorFlowBackend) -> TensorFlowTrainStep:
    return TensorFlowTrainStep(backend)
