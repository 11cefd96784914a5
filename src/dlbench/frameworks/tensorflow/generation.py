"""TensorFlow text generation: transformers' TensorFlow causal-LM classes (tf-keras) and
their `generate()`, greedy, a fixed number of new tokens; eager (Python's loop, each step
timestamped by a logits processor), graph (generate inside one tf.function) and xla
(tf.function(jit_compile=True): one XLA program, the prompt left-padded to a multiple
of XLA_PAD_TO_MULTIPLE_OF tokens as transformers' XLA recipe does), each in fp32 or under
the mixed_bfloat16 policy. A compiled recipe traces once per shape: a cell has one prompt
length, and the traces it made are recorded (more than one would be a retrace).

The language-model head runs on the last position only (`_head_on_last_position`), the one
generate chooses a token from, as PyTorch's generate asks of its model (logits_to_keep=1):
transformers' TensorFlow head multiplies every position of the prompt, in every recipe
(distilgpt2, a 32-token prompt: 31 positions, 2.4 GFLOP more than PyTorch's in the first
token), and XLA does not cut the product down to the slice generate keeps."""

# The backend first: it sets the environment that transformers and the framework read
# when they load.
from dlbench.frameworks.tensorflow.backend import TensorFlowBackend  # isort: split

import time
from pathlib import Path

import numpy as np
import tensorflow as tf
import transformers

from dlbench.catalogue.models import ModelSpec
from dlbench.catalogue.recipes import Optimization
from dlbench.frameworks.tensorflow.inference import (
    _POLICIES,
    _load_pytorch_weights,
    built_to_load,
    traced_as_is,
)
from dlbench.measure.decoder import HEAD_ON_LAST_POSITION, Decoder

# The causal-LM class of each decoder family (its head tied to the word embeddings), and
# its base layer, whose last hidden states the head multiplies.
LM_CLASSES = {"gpt2": "TFGPT2LMHeadModel"}
BASE_LAYERS = {"gpt2": "transformer"}
# transformers' XLA recipe for generate: the prompt left-padded (masked) to a multiple of
# this, so that prompts of nearby lengths share one shape and one compiled program
# instead of retracing (its docs' and blog's `pad_to_multiple_of=8`).
XLA_PAD_TO_MULTIPLE_OF = 8


def left_pad(inputs: dict, multiple: int, pad_id: int) -> tuple[dict, int]:
    """The prompt left-padded to a multiple of `multiple` tokens, the padding masked
    (generate takes each token's position from the mask), and the padded length."""
    length = int(inputs["input_ids"].shape[1])
    padded = -(-length // multiple) * multiple
    extra = padded - length
    if extra == 0:
        return inputs, padded
    ids, mask = inputs["input_ids"], inputs["attention_mask"]
    batch = int(ids.shape[0])
    return {"input_ids": tf.concat([tf.fill([batch, extra], tf.constant(pad_id, ids.dtype)),
                                    ids], axis=1),
            "attention_mask": tf.concat([tf.zeros([batch, extra], mask.dtype), mask],
                                        axis=1)}, padded


def _head_on_last_position(base) -> None:
    """The base layer's hidden states cut to the last position (its `call`, on this
    instance), so that the head's logits are (batch, 1, vocab) and generate's
    `logits[:, -1]` picks the same token from them; the key-value cache is left whole."""
    call = base.call

    def last_position(*args, **kwargs):
        out = call(*args, **kwargs)
        if isinstance(out, tuple):
            return (out[0][:, -1:], *out[1:])
        out["last_hidden_state"] = out["last_hidden_state"][:, -1:]
        return out

    base.call = last_position


class _Stamps(transformers.TFLogitsProcessor):
    """Notes the time at which each step's logits are ready (eager only: a traced
    function would note the time of its tracing)."""

    def __init__(self):
        self.times: list[float] = []

    def __call__(self, input_ids, scores, cur_len):
        scores.numpy()  # the step's work done, not only queued
        self.times.append(time.perf_counter())
        return scores


class TensorFlowGeneration:
    # The head on the last position only (see the module); False: on every position, as
    # transformers' class computes it (a test compares the two).
    head_on_last_position = True

    def __init__(self, backend: TensorFlowBackend):
        self.backend = backend
        # None: no padding (a test's comparison; the xla recipe pads)
        self.pad_to_multiple_of: int | None = XLA_PAD_TO_MULTIPLE_OF
        self._start: int | None = None  # where the new tokens start in the padded output

    def build(self, spec: ModelSpec, seed: int, optimization: Optimization,
              weights: Path | None = None, attention: str = "sdpa"):
        """The causal LM on the device: PyTorch's shared weights of the base model (the
        head is tied to the word embeddings) if given, else random."""
        tf.keras.mixed_precision.set_global_policy(
            _POLICIES.get(optimization.precision.name, "float32"))
        tf.keras.utils.set_random_seed(seed)
        config = getattr(transformers, spec.classes.config_class)(**spec.params)
        model_class = getattr(transformers, LM_CLASSES[spec.family])
        with tf.device(self.backend.device_name), built_to_load(model_class, weights):
            model = model_class(config)
            model.build_in_name_scope()
        if weights is not None:
            with tf.device(self.backend.device_name):
                _load_pytorch_weights(model, Path(weights))
        if self.head_on_last_position:
            _head_on_last_position(getattr(model, BASE_LAYERS[spec.family]))
        traced_as_is(model)  # generate() itself is converted: it branches on tensors
        return model

    def inputs(self, token_ids: np.ndarray) -> dict:
        with tf.device(self.backend.device_name):
            ids = tf.constant(token_ids, dtype=tf.int32)
            return {"input_ids": ids, "attention_mask": tf.ones_like(ids)}

    def decoder(self, model, inputs: dict, new_tokens: int,
                optimization: Optimization) -> Decoder:
        recipe = optimization.recipe.name
        # Exactly `new_tokens`: given eos_token_id=None, transformers' TF greedy search
        # falls back to the model's generation_config.eos_token_id and stops (or pads)
        # at the end-of-text id, where PyTorch goes on.
        model.generation_config.eos_token_id = None

        def options(tokens: int) -> dict:
            return dict(do_sample=False, num_beams=1, max_new_tokens=tokens,
                        min_new_tokens=tokens, eos_token_id=None,
                        pad_token_id=model.config.eos_token_id)

        device = self.backend.device_name
        last = f"; {HEAD_ON_LAST_POSITION}" if self.head_on_last_position else ""

        def first_step(input_ids, attention_mask):
            """generate()'s first step on its own: the prompt's forward pass with its
            key-value cache (generate's XLA path pads it for the whole generation after this
            pass) and the greedy choice. (generate() cannot make one token under
            tf.function in transformers 4.57: a negative padding.)"""
            step = model.prepare_inputs_for_generation(
                input_ids, attention_mask=attention_mask, use_cache=True)
            out = model(**step, training=False)
            return tf.argmax(out.logits[:, -1], axis=-1), out.past_key_values

        if recipe == "eager":
            stamps = _Stamps()
            processors = transformers.TFLogitsProcessorList([stamps])

            def call():
                stamps.times = []
                with tf.device(device):
                    return model.generate(**inputs, logits_processor=processors,
                                          **options(new_tokens))

            def first():
                with tf.device(device):
                    return first_step(**inputs)

            return Decoder(call=call, how="generate(), greedy, eagerly from Python" + last,
                           stamps=lambda: list(stamps.times), first=first)
        jit = recipe == "xla"
        multiple = self.pad_to_multiple_of if jit else None
        pad_id = model.config.eos_token_id or 0

        def pad(prompt: dict) -> dict:
            if multiple is None:
                return prompt
            with tf.device(device):
                return left_pad(prompt, multiple, pad_id)[0]

        inputs = pad(inputs)
        self._start = int(inputs["input_ids"].shape[1])

        # The prompt is an argument, not a captured constant that a compiler could fold.
        @tf.function(jit_compile=jit)
        def whole(input_ids, attention_mask):
            return model.generate(input_ids=input_ids, attention_mask=attention_mask,
                                  **options(new_tokens))

        first = tf.function(first_step, jit_compile=jit)  # compiled as the whole is

        def run(function):
            def call():
                with tf.device(device):
                    return function(**inputs)
            return call

        how = ("generate() inside tf.function(jit_compile=True): one XLA program"
               if jit else "generate() inside one tf.function graph") + (
            f"; the prompt left-padded (masked) to a multiple of {multiple} tokens"
            if multiple else "") + last
        def call_with(other):
            other = pad(other)
            with tf.device(device):
                return whole(**other)

        return Decoder(call=run(whole), first=run(first), how=how,
                       traces=whole.experimental_get_tracing_count, call_with=call_with,
                       compilations=whole.experimental_get_tracing_count,
                       counted="traces of the tf.function around generate "
                               "(experimental_get_tracing_count)")

    def new_ids(self, output, prompt_length: int) -> np.ndarray:
        start = prompt_length if self._start is None else self._start  # after the padding
        return output[:, start:].numpy().astype(np.int64)

    def attention(self, model) -> dict:
        return {"implementation": "eager", "implementation_of": "transformers (TensorFlow classes)"}

    def compilation(self) -> None:
        return None

    def versions(self) -> dict[str, str]:
        return {"transformers": transformers.__version__}

    def release(self) -> None:
        self._start = None
        tf.keras.backend.clear_session()
        tf.keras.mixed_precision.set_global_policy("float32")


def make_ops(backend: TensorFlowBackend) -> TensorFlowGeneration:
    return TensorFlowGeneration(backend)
