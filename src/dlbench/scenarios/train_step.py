"""Training steps of a transformer: forward, loss, backward and the optimizer step at a
given batch and length, the optimizer step timed on its own as well as the whole step.

Cells: framework × model × device × batch × sequence length × optimizer × optimization
(the training recipes of dlbench.catalogue.recipes). A cell builds the model with the
shared seeded weights (those of inference, the same in every framework) and puts a tied
language-model head on it: logits = last hidden state × word embeddingsᵀ, cross-entropy
against the input token ids (inference's random ordinary ids). It checks the loss before
training, dropout off, against the reference (the same loss of PyTorch eager fp32's hidden
state), then times the first step on its own, warms up and runs the timed loop, each step in
two parts — forward + loss + backward, then the optimizer step — each followed by the
device's synchronization; a step compiled as a whole is one part.
"""

import time
from typing import TYPE_CHECKING

from dlbench.catalogue import recipes
from dlbench.catalogue.models import MODELS, get_model
from dlbench.catalogue.optimizers import OPTIMIZERS
from dlbench.scenarios import Axis, Scenario, register
from dlbench.scenarios._compilation import COMPILATION_SCHEMA
from dlbench.scenarios._optimizer import OPTIMIZER_AXIS, OptimizerSettings
from dlbench.scenarios._reference import SharedReference
from dlbench.scenarios.inference import (
    CORRECTNESS_SCHEMA,
    THROUGHPUT_SCHEMA,
    Inference,
    throughput,
    transformer_inputs,
    transformer_problem,
)
from dlbench.scenarios.train_step_ops import TrainStepOps

if TYPE_CHECKING:
    import numpy as np

    from dlbench.scenarios.cell import Cell

# How many of the first steps' losses a result keeps (every step's would be as many numbers
# as the timing's samples): enough to see the loss fall.
FIRST_LOSSES = 10


def reference_loss(hidden: "np.ndarray", embeddings: "np.ndarray",
                   ids: "np.ndarray") -> float:
    """The cells' loss in float64 numpy: mean cross-entropy of hidden × embeddingsᵀ against
    the token ids (a few hundred tokens at a time, so that the logits stay small)."""
    import numpy as np

    hidden = hidden.reshape(-1, hidden.shape[-1]).astype(np.float64)
    targets, weights = ids.reshape(-1), embeddings.astype(np.float64)
    total = 0.0
    for start in range(0, len(targets), 256):
        logits = hidden[start:start + 256] @ weights.T
        top = logits.max(axis=1, keepdims=True)
        log_norm = np.log(np.exp(logits - top).sum(axis=1)) + top[:, 0]
        picked = logits[np.arange(len(logits)), targets[start:start + 256]]
        total += float((log_norm - picked).sum())
    return total / len(targets)


class TrainStep(SharedReference, OptimizerSettings, Scenario):
    name = "train_step"
    ops_interface = TrainStepOps
    description = ("a transformer's training step (forward, loss, backward, optimizer step), "
                   "the optimizer step timed on its own")
    axes = (
        Axis("batch", "batch_sizes", "b", "batch sizes (samples per step)"),
        Axis("seqlen", "sequence_lengths", "s", "sequence lengths in tokens"),
        OPTIMIZER_AXIS,
    )
    summary_sections = {"throughput": "", "step": "step_", "loss": "loss_",
                        "correctness": "correctness_", "compilation": "compilation_"}

    def models(self) -> list[str]:
        return list(MODELS)

    def unsupported_reason(self, cell: "Cell") -> str | None:
        optimization = recipes.optimization(self.recipes_of, cell.optimization, cell.framework)
        reason = optimization.unsupported_reason(cell.framework, cell.device)
        if reason:
            return reason
        if optimization.recipe.convolutions_only:
            return (f"optimization '{cell.optimization}' changes the layout of convolutions; "
                    f"{cell.model} has none")
        return transformer_problem(cell, optimization.precision.name)

    # -- the shared weights and reference outputs: inference's, for the same model, batch
    # and length (dlbench.reference; `dlbench run --weights/--reference`) -------------------

    reference_name = Inference.reference_name

    # -- measuring ---------------------------------------------------------------------------

    def measure(self, backend, cell: "Cell", settings: dict, clock, inputs: dict) -> dict:
        import numpy as np

        from dlbench.frameworks import load_ops
        from dlbench.measure.correctness import compare
        from dlbench.measure.parts import TimedParts
        from dlbench.measure.timing import steady_state

        optimization = recipes.optimization(self.recipes_of, cell.optimization, cell.framework)
        problem = backend.precision_problem(optimization.precision.name)
        if problem:
            return {"status": "unsupported", "reason": problem}
        ids, weights, reference_file, expected = transformer_inputs(
            backend, cell, settings["seed"], inputs)
        spec, optimizer = get_model(cell.model), OPTIMIZERS[cell.size("optimizer")]
        ops: TrainStepOps = load_ops(backend, "train_step")
        backend.reset_device_memory()
        try:
            model = ops.build(spec, settings["seed"], optimization, weights)
            model_inputs = ops.inputs(ids)
            initial = ops.initial_loss(model, model_inputs, optimization)
            correctness = None
            if expected is not None:
                wanted = reference_loss(expected, ops.word_embeddings(model), ids)
                correctness = compare(np.array([initial]), np.array([wanted]), reference_file,
                                      optimization.precision)
            opt = ops.optimizer(model, optimizer, settings["learning_rate"], optimization)
            start = time.perf_counter()
            step = ops.train_step(model, opt, model_inputs, optimization)
            prepare_s = time.perf_counter() - start
            clock.mark("model_ready_s")
            parts = TimedParts(step, backend.synchronize)
            timing = steady_state(parts, backend.synchronize, settings, clock,
                                  backend.device_timer())
            losses = ops.losses(parts.outputs)
            device_memory = backend.device_memory()
            implementation = ops.implementation(opt, optimization)
            compilation = ops.compilation()  # the first step, warm-up and timed loop
        finally:
            ops.release()
        breakdown = parts.breakdown(1 + settings["warmup_iterations"], timing["samples_ms"])
        compile_s = max(0.0, prepare_s + timing["cold_start_s"] - timing["median_ms"] / 1e3)
        return {
            "optimization": {**optimization.describe(), "description": optimization.description},
            "timing": {"prepare_s": prepare_s, "compile_s": compile_s, **timing,
                       **({"breakdown": breakdown} if breakdown else {})},
            "throughput": throughput(cell, timing["median_ms"]),
            "step": {"separable": step.separable, "parts": list(step.parts), "how": step.how,
                     "parts_cold_start_s": parts.cold_start_s(),
                     "warmup_s": parts.warmup_s(settings["warmup_iterations"]),
                     "optimizer": optimizer.description,
                     "learning_rate": settings["learning_rate"],
                     "implementation": implementation},
            "loss": {"initial": initial, "steps": len(losses), "first": losses[0],
                     "last": losses[-1], "first_steps": losses[:FIRST_LOSSES],
                     "finite": bool(np.isfinite(losses).all())},
            "correctness": correctness,
            "compilation": compilation,
            "memory": device_memory or {},
            "details": ops.versions(),
        }

    def combine(self, records: list[dict]) -> dict:
        """The repeats: the step's samples pooled as for any scenario, and so are each
        part's, with their shares."""
        from dlbench.measure.parts import breakdown

        ok = records[0]["status"] == "ok" and "breakdown" in records[0]["timing"]
        parts = {name: [x for r in records for x in r["timing"]["breakdown"][name]["samples_ms"]]
                 for name in records[0]["timing"]["breakdown"]} if ok else {}
        final = super().combine(records)
        if len(records) == 1 or final["status"] != "ok":
            return final
        if parts:
            final["timing"]["breakdown"] = breakdown(parts, final["timing"]["samples_ms"])
        final["throughput"] = throughput(_cell(final["params"]), final["timing"]["median_ms"])
        return final

    def iteration_flops(self, model: str, sizes: dict[str, int]) -> float | None:
        """A training step's FLOPs (dlbench.measure.flops.step_flops)."""
        from dlbench.measure import flops

        try:
            return flops.step_flops(self.name, model, sizes["batch"], sizes.get("seqlen"))
        except (KeyError, ValueError):  # a model without a count
            return None

    # -- its part of the result schema -------------------------------------------------------

    def result_schema(self) -> dict:
        schema = super().result_schema()
        part = {"type": "object", "required": ["samples_ms", "share", "median_ms"],
                "properties": {"share": {"type": "number", "minimum": 0, "maximum": 1}}}
        schema["properties"] = {
            "throughput": THROUGHPUT_SCHEMA,
            "correctness": CORRECTNESS_SCHEMA,
            "compilation": COMPILATION_SCHEMA,
            "timing": {"type": ["object", "null"], "properties": {"breakdown": {
                "type": "object", "description": "each part of the step: its samples, "
                "statistics and share of the step (a step that is not separable has none)",
                "required": ["forward_backward", "optimizer"],
                "additionalProperties": False,
                "properties": {"forward_backward": part, "optimizer": part}}}},
            "step": {
                "type": "object",
                "required": ["separable", "parts", "how", "optimizer", "learning_rate",
                             "implementation"],
                "properties": {
                    "separable": {"type": "boolean"},
                    "parts": {"type": "array", "minItems": 1, "items": {"type": "string"}},
                    "how": {"type": "string"},
                    "learning_rate": {"type": "number", "exclusiveMinimum": 0},
                    "implementation": {"type": "string"},
                    "warmup_s": {"type": "number", "minimum": 0},
                },
            },
            "loss": {
                "type": "object",
                "description": "the loss: before training, dropout off (initial); the first "
                               "and the last step's, dropout on; the first steps'",
                "required": ["initial", "steps", "first", "last", "first_steps", "finite"],
                "properties": {
                    "initial": {"type": "number"}, "first": {"type": ["number", "null"]},
                    "last": {"type": ["number", "null"]},
                    "steps": {"type": "integer", "minimum": 1},
                    "first_steps": {"type": "array", "items": {"type": ["number", "null"]}},
                    "finite": {"type": "boolean"},
                },
            },
        }
        schema["ok_requires"] = ["throughput", "step", "loss"]
        return schema


def _cell(params: dict) -> "Cell":
    from dlbench.scenarios.cell import Cell

    return Cell.from_params(params)


register(TrainStep())
