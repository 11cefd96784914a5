"""TensorFlow inference: transformers' TensorFlow classes (tf-keras); eager, tf.function and
XLA, each in fp32, tf32 or under a bf16/fp16 mixed-precision policy. transformers' TF
classes have one attention implementation, the explicit one (matmul, the additive mask,
softmax, matmul), which applies the mask in every recipe."""

# The backend first: it sets the environment that transformers and the framework read
# when they load.
from dlbench.frameworks.tensorflow.backend import TensorFlowBackend  # isort: split

import contextlib
import sys
from pathlib import Path

import numpy as np
import tensorflow as tf
import transformers

from dlbench.catalogue.models import ModelSpec
from dlbench.catalogue.recipes import Optimization
from dlbench.frameworks.tensorflow.about import FRAMEWORK

_POLICIES = {"bf16": "mixed_bfloat16", "fp16": "mixed_float16"}
_REDUCED = {"bf16": tf.bfloat16, "fp16": tf.float16}
# Graph ops that move, view or create tensors without computing on them: left out of the
# record of which ops computed in which type under a mixed-precision policy.
_MOVEMENT = frozenset({
    "Cast", "Identity", "IdentityN", "Reshape", "Transpose", "Const", "Shape", "StridedSlice",
    "Pack", "Unpack", "ConcatV2", "ReadVariableOp", "Placeholder", "NoOp", "ExpandDims",
    "Squeeze", "Fill", "ZerosLike", "OnesLike", "Range", "BroadcastTo", "Split", "SplitV",
    "Slice", "Tile",
})


def _forward(model, inputs: dict):
    return model(**inputs, training=False).last_hidden_state


def _eager(model, inputs: dict, optimization: Optimization):
    return lambda: _forward(model, inputs)


def _function(model, inputs: dict, jit_compile: bool):
    # The inputs are arguments, not captured constants that a compiler could fold.
    @tf.function(jit_compile=jit_compile)
    def forward(input_ids, attention_mask):
        return _forward(model, {"input_ids": input_ids, "attention_mask": attention_mask})

    return lambda: forward(**inputs)


def _graph(model, inputs: dict, optimization: Optimization):
    return _function(model, inputs, jit_compile=False)


def _xla(model, inputs: dict, optimization: Optimization):
    return _function(model, inputs, jit_compile=True)


class TensorFlowInference:
    recipes = {"eager": _eager, "graph": _graph, "xla": _xla}

    def __init__(self, backend: TensorFlowBackend):
        self.backend = backend

    def build(self, spec: ModelSpec, seed: int, optimization: Optimization,
              weights: Path | None = None, attention: str = "sdpa"):
        """The model on the device: the weights of a safetensors file written by
        `dlbench.reference` (PyTorch's, read without torch) if given, else random.
        (`attention` has no choice here: see the module's note.)"""
        # The policy applies to the layers created after it is set: compute in the
        # reduced precision, variables (and so the loaded weights) in float32. It is
        # global: release() puts float32 back.
        policy = _POLICIES.get(optimization.precision.name, "float32")
        tf.keras.mixed_precision.set_global_policy(policy)
        tf.keras.utils.set_random_seed(seed)
        config = getattr(transformers, spec.classes.config_class)(**spec.params)
        model_class = getattr(transformers, FRAMEWORK.model_class(spec.family))
        with tf.device(self.backend.device_name), built_to_load(model_class, weights):
            model = model_class(config)
            # Create the weights now, so that the first timed call is not weight creation.
            model.build_in_name_scope()
        if weights is not None:
            with tf.device(self.backend.device_name):
                _load_pytorch_weights(model, Path(weights))
        traced_as_is(model)
        return model

    def inputs(self, token_ids: np.ndarray) -> dict:
        with tf.device(self.backend.device_name):
            ids = tf.constant(token_ids, dtype=tf.int32)
            return {"input_ids": ids, "attention_mask": tf.ones_like(ids)}

    def to_numpy(self, output) -> np.ndarray:
        return tf.cast(output, tf.float32).numpy()

    def versions(self) -> dict[str, str]:
        return {"transformers": transformers.__version__}

    def same_attention_work(self, model, inputs: dict) -> None:
        """Nothing to do: every recipe runs the same explicit attention with its mask."""

    def attention(self, model) -> dict:
        return {"implementation": "eager", "mask_applied": True,
                "implementation_of": "transformers (TensorFlow classes)"}

    def compilation(self) -> None:
        return None

    def precision_ops(self, model, inputs: dict, optimization: Optimization) -> dict:
        """Which graph ops compute in float32 and which in the reduced type under the
        Keras policy, from the traced graph of the forward pass (the recipe does not
        change the policy's choices; XLA compiles this graph)."""
        reduced = _REDUCED[optimization.precision.name]
        seen: dict = {tf.float32: set(), reduced: set()}

        @tf.function
        def forward(input_ids, attention_mask):
            return _forward(model, {"input_ids": input_ids, "attention_mask": attention_mask})

        graph = forward.get_concrete_function(**inputs).graph
        for op in graph.get_operations():
            if op.type in _MOVEMENT:
                continue
            for output in op.outputs:
                if output.dtype in seen:
                    seen[output.dtype].add(op.type)
        return {"float32_ops": sorted(seen[tf.float32]), "reduced_ops": sorted(seen[reduced]),
                "method": "TensorFlow graph ops by the floating-point type of their outputs, "
                          "from the forward pass traced under the Keras policy (casts, "
                          "reshapes and reads left out)"}

    def release(self) -> None:
        """Leave the process as the cell found it: an empty Keras state (layer names,
        graphs) and the float32 policy."""
        tf.keras.backend.clear_session()
        tf.keras.mixed_precision.set_global_policy("float32")


def traced_as_is(model) -> None:
    """The model's forward pass left out of AutoGraph's conversion in every tf.function
    that calls it (a recipe's, a training step's, generate()'s): it has no control flow on
    tensors to convert into graph ops (a Python `if` on one would fail the trace, not
    change it), so the graph is the same, and its trace skips converting the source of
    every layer, which took most of it (a 2-core AMD EPYC, 2026-12-02): BERT base's first
    graph call 1.9-2.1 s against 6.7-8.9 s, its outputs identical; distilgpt2's two xla
    traces 16.3-22.2 s against 23.6-27.3 s, the same ids. jax.jit traces Python as it
    is, too."""
    model.call = tf.autograph.experimental.do_not_convert(model.call)


@contextlib.contextmanager
def built_to_load(model_class, weights: Path | None):
    """Where weights will be loaded into the model, it is built with zeros instead of
    random draws: every weight is overwritten (a weight the file lacks is an error), and
    drawing bert-base's 110M normal numbers took 1.4 of its 2 s of building here. The
    random draws stay where no weights are given."""
    if weights is None:
        yield
        return
    module = sys.modules[model_class.__module__]
    drawn = getattr(module, "get_initializer", None)
    if drawn is None:  # a family whose layers draw otherwise: built as they are
        yield
        return
    module.get_initializer = lambda initializer_range=0.02: tf.keras.initializers.Zeros()
    try:
        yield
    finally:
        module.get_initializer = drawn


def _load_pytorch_weights(model, weights: Path) -> None:
    """PyTorch's safetensors weights into the TF model, without importing torch.

    (`from_pretrained(folder)` would read them too, but transformers 4.57 cannot iterate
    the safe_open handle of safetensors 0.8; a dict of numpy arrays works.)
    """
    from safetensors.numpy import load_file
    from transformers.modeling_tf_pytorch_utils import load_pytorch_state_dict_in_tf2_model

    state = load_file(weights)
    _, info = load_pytorch_state_dict_in_tf2_model(
        model, state, tf_inputs=False, allow_missing_keys=True, output_loading_info=True,
        skip_logger_warnings=True,
    )
    if info["missing_keys"] or info["mismatched_keys"]:
        raise ValueError(f"{weights} does not fit {type(model).__name__}: {info}")


def make_ops(backend: TensorFlowBackend) -> TensorFlowInference:
    return TensorFlowInference(backend)
