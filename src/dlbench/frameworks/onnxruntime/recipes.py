"""ONNX Runtime's recipes, declared for dlbench.catalogue.recipes (implemented in
inference.py). A light module: it imports no framework.

Each recipe is an `InferenceSession` over the same exported graph at one of ONNX Runtime's
graph optimization levels (onnxruntime.GraphOptimizationLevel), applied when the session
is made: every one runs the whole graph in ONNX Runtime's executor, not op by op from
Python, so each is a compiled recipe."""

from dlbench.catalogue.recipes import INFERENCE, Recipe

# The precisions of a CPU: -fp16 converts the exported graph to float16 (inference.py) where
# the CPU has the units and the CPU execution provider a float16 MatMul; -bf16 says why it
# cannot run (the backend's precision_problem) rather than that it does not exist.
_PRECISIONS = ("fp32", "bf16", "fp16")

# What each level did to BERT base's exported graph (840 nodes, 132 of them Transposes and
# 194 Constants; onnxruntime 1.32, SessionOptions.optimized_model_filepath, 2026-11-29):
# basic folded the constants, the weights' transposes among them, to 384 nodes (disabled,
# the session transposes each weight matrix at every call: 6× as slow at b1 s16); extended
# made 312 (Add + LayerNormalization → SkipLayerNormalization, the bias and GELU →
# BiasGelu, the attention's scaling into FusedMatMul; no attention fusion); all gave the
# same graph as extended (its layout transforms are for convolutions).
RECIPES = (
    Recipe("ort-disable", "ONNX Runtime InferenceSession, graph optimizations disabled "
           "(ORT_DISABLE_ALL): the exported graph as it is", INFERENCE, compiled=True,
           precisions=_PRECISIONS),
    Recipe("ort-basic", "ONNX Runtime InferenceSession, basic graph optimizations "
           "(ORT_ENABLE_BASIC: constant folding, the weights' transposes among them; "
           "redundant nodes removed)", INFERENCE,
           compiled=True, precisions=_PRECISIONS),
    Recipe("ort-extended", "ONNX Runtime InferenceSession, extended graph optimizations "
           "(ORT_ENABLE_EXTENDED: fusions, e.g. SkipLayerNormalization, BiasGelu, the "
           "attention's scaling into FusedMatMul)", INFERENCE, compiled=True,
           precisions=_PRECISIONS),
    Recipe("ort-all", "ONNX Runtime InferenceSession, every graph optimization "
           "(ORT_ENABLE_ALL, its default: extended, and layout transforms for "
           "convolutions)", INFERENCE, compiled=True, precisions=_PRECISIONS),
)
