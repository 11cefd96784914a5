"""TensorFlow's recipes, declared for dlbench.catalogue.recipes (implemented in the
scenario modules beside this one). A light module: it imports no framework."""

from dlbench.catalogue.recipes import (
    EAGER_INFERENCE,
    EAGER_TRAINING,
    GENERATION,
    INFERENCE,
    TRAINING,
    Recipe,
)

RECIPES = (
    # -- inference ---------------------------------------------------------------------------
    EAGER_INFERENCE,
    Recipe("graph", "tf.function graph execution", INFERENCE, compiled=True),
    Recipe("xla", "tf.function with jit_compile=True (XLA)", INFERENCE, compiled=True),
    # -- training (the CNN's and a transformer's step) ---------------------------------------
    EAGER_TRAINING,
    Recipe("graph", "the training step as a tf.function graph", TRAINING, compiled=True),
    Recipe("xla", "the training step as tf.function(jit_compile=True): XLA", TRAINING,
           compiled=True),
    Recipe("legacy-optimizer", "the optimizer of tf.keras.optimizers.legacy (eager): one C++ "
           "kernel per variable (ResourceApplyAdam; ResourceApplyKerasMomentum, or "
           "ResourceApplyMomentum where the learning rate falls), the "
           "implementation before TensorFlow 2.11, whose optimizers compose TensorFlow ops",
           TRAINING),
    Recipe("channels-first", "convolutions in channels_first (NCHW)", TRAINING,
           gpu_only="TensorFlow's CPU convolution and pooling kernels support only NHWC "
           "(channels_last)", convolutions_only=True),
    # -- generation (greedy decoding; bf16: the mixed_bfloat16 policy) ----------------------
    # Protocol 2: exactly new_tokens tokens (before, a stop at the model's end-of-text id);
    # the first token timed as generate's first step, alike in every framework.
    Recipe("eager", "generate() eagerly, token by token from Python", GENERATION,
           protocol=2),
    Recipe("graph", "generate() inside one tf.function (a graph with a while loop)",
           GENERATION, compiled=True, protocol=2),
    Recipe("xla", "generate() inside tf.function(jit_compile=True): one XLA program for the "
           "prompt and every decoding step", GENERATION, compiled=True, protocol=2),
)
