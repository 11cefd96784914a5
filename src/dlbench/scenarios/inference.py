"""Inference: a transformer's forward pass without gradients.

Cells: framework × model × device × batch × sequence length × optimization. A cell builds
the model (the shared seeded weights), applies the optimization, times the first call on
its own, warms up, runs the timed loop, and checks one more call's output against the
reference output (PyTorch eager, fp32, CPU, the same weights and token ids).
"""

import gc
import time
from typing import TYPE_CHECKING

from dlbench.catalogue import frameworks, recipes
from dlbench.catalogue.models import MODELS, ModelSpec, get_model
from dlbench.catalogue.precisions import MIXED, PRECISIONS
from dlbench.catalogue.recipes import Optimization
from dlbench.files import paths
from dlbench.scenarios import Axis, Scenario, register
from dlbench.scenarios._compilation import COMPILATION_SCHEMA
from dlbench.scenarios._reference import SharedReference
from dlbench.scenarios.inference_ops import InferenceOps

if TYPE_CHECKING:
    import numpy as np

    from dlbench.scenarios.cell import Cell

# The transformers line whose model classes the registry names.
TRANSFORMERS_LINE = "4.57"
# Ids below this are special in the registry's vocabularies (padding, unknown, separators,
# masks): ordinary text has none, and some models treat them apart (XLM masks its padding
# id out, RoBERTa skips it when numbering positions).
FIRST_ORDINARY_TOKEN = 16


# Result-schema sections that the scenarios of the registry's models share.
THROUGHPUT_SCHEMA = {
    "type": ["object", "null"],
    "required": ["samples_per_s", "tokens_per_s"],
    "properties": {
        "samples_per_s": {"type": "number", "exclusiveMinimum": 0},
        "tokens_per_s": {"type": "number", "exclusiveMinimum": 0},
    },
}
CORRECTNESS_SCHEMA = {
    "type": ["object", "null"],
    "description": "the output against the reference (PyTorch eager fp32 on the CPU); null "
                   "where no reference was given",
    "required": ["reference", "precision", "finite", "max_abs_error", "max_rel_error",
                 "tolerance", "within_tolerance"],
    "properties": {
        "reference": {"type": "string"},
        "reference_file": {"type": "string"},
        "precision": {"enum": list(PRECISIONS)},
        "finite": {"type": "boolean"},
        "max_abs_error": {"type": ["number", "null"], "minimum": 0},
        "max_rel_error": {"type": ["number", "null"], "minimum": 0,
                          "description": "max |output - reference| / max |reference|"},
        "reference_max_abs": {"type": "number", "minimum": 0},
        "tolerance": {"type": "number", "exclusiveMinimum": 0},
        "within_tolerance": {"type": "boolean"},
    },
}


def token_ids(spec: ModelSpec, batch: int, seqlen: int, seed: int) -> "np.ndarray":
    """The same random, ordinary (non-special) token ids for every framework."""
    import numpy as np

    rng = np.random.default_rng(seed)
    return rng.integers(FIRST_ORDINARY_TOKEN, spec.vocab_size, size=(batch, seqlen),
                        dtype=np.int64)


def prepare(ops, model, inputs: dict, optimization: Optimization, default: str = "eager"):
    """The step of an optimization: its recipe in its precision (tracing happens here); a
    test recipe perturbs the framework's `default` (its Framework.default_inference)."""
    recipe = optimization.recipe
    if recipe.perturb is None:
        return ops.recipes[recipe.name](model, inputs, optimization)
    step = ops.recipes[default](model, inputs, optimization)
    factor = recipe.perturb
    return lambda: step() * factor


def transformer_inputs(backend, cell: "Cell", seed: int, inputs: dict
                       ) -> tuple["np.ndarray", str | None, str | None, "np.ndarray | None"]:
    """A registry model's cell's token ids, shared weights, reference file and reference
    output (None without one). A reference needs the shared weights outside the reference
    framework (which seeds them itself), and a stale one fails here, not after timing. Any
    scenario of these models shares it."""
    from dlbench.measure.correctness import load_reference

    weights, reference_file = inputs.get("weights"), inputs.get("reference")
    seeds_them = backend.name == frameworks.REFERENCE_FRAMEWORK
    if reference_file is not None and weights is None and not seeds_them:
        raise ValueError("a reference output needs the shared weights (--weights) as well")
    spec = get_model(cell.model)
    ids = token_ids(spec, cell.size("batch"), cell.size("seqlen"), seed)
    expected = (None if reference_file is None
                else load_reference(reference_file, ids, dict(spec.params)))
    return ids, weights, reference_file, expected


def transformer_problem(cell: "Cell", precision: str) -> str | None:
    """Why a cell of a registry model cannot apply whatever its recipe (None if it can):
    a family the framework cannot run, no class in the cell's framework, a reduced
    precision that the framework's class cannot run in, a sequence longer than the model's
    positions. Any scenario of these models
    (the `seqlen` axis) shares these rules."""
    spec = get_model(cell.model)
    framework = frameworks.get(cell.framework)
    if spec.family in framework.no_family:
        return f"{cell.model} ({spec.family}) in {framework.label}: " \
               f"{framework.no_family[spec.family]}"
    if framework.model_class(spec.family) is None:
        return (
            f"transformers {TRANSFORMERS_LINE} has no {framework.label} "
            f"class for {cell.model} ({spec.family})"
        )
    no_mixed = framework.no_mixed_precision.get(spec.family)
    if precision != "fp32" and no_mixed:
        return f"optimization '{cell.optimization}' on {cell.model}: {no_mixed}"
    no_fp16 = framework.no_fp16.get(spec.family)
    if precision == "fp16" and no_fp16:
        return f"optimization '{cell.optimization}' on {cell.model}: {no_fp16}"
    seqlen = cell.size("seqlen")
    if spec.max_positions is not None and seqlen > spec.max_positions:
        return (
            f"sequence length {seqlen} exceeds {cell.model}'s maximum of "
            f"{spec.max_positions} positions"
        )
    return None


class Inference(SharedReference, Scenario):
    name = "inference"
    ops_interface = InferenceOps
    description = "a transformer's forward pass without gradients (the 2019 benchmark)"
    axes = (
        Axis("batch", "batch_sizes", "b", "batch sizes (samples per call)"),
        Axis("seqlen", "sequence_lengths", "s", "sequence lengths in tokens"),
    )
    groupable = True
    summary_sections = {"throughput": "", "correctness": "correctness_",
                        "attention": "attention_",
                        "compilation": "compilation_", "mixed_precision": "mixed_precision_"}

    def models(self) -> list[str]:
        return list(MODELS)

    def id_head(self, cell: "Cell") -> str:
        # No scenario prefix: inference ids are those of v1, so finished results are reused.
        return f"{cell.framework}_{cell.model}_{cell.device}"

    def unsupported_reason(self, cell: "Cell") -> str | None:
        chosen = recipes.optimization(self.recipes_of, cell.optimization, cell.framework)
        return (chosen.unsupported_reason(cell.framework, cell.device)
                or transformer_problem(cell, chosen.precision.name))

    def protocol(self, cell: "Cell") -> int:
        """2 where dlbench after v1 measures differently: the recipe's (PyTorch's
        torchscript and compile: the same attention work as eager, frozen weights in
        compile on the CPU), or the framework's on the device (TensorFlow on a GPU: float32
        without TF32, memory growth)."""
        protocol = recipes.optimization(self.recipes_of, cell.optimization,
                                       cell.framework).recipe.protocol
        floor = frameworks.get(cell.framework).inference_protocol.get(cell.device)
        return protocol if floor is None else max(protocol, floor)

    # -- the shared weights and reference outputs (dlbench.reference) ----------------------

    def reference_name(self, cell: "Cell") -> str:
        return paths.reference_output_name(cell.size("batch"), cell.size("seqlen"))

    # -- measuring ---------------------------------------------------------------------------

    def measure(self, backend, cell: "Cell", settings: dict, clock, inputs: dict) -> dict:
        from dlbench.frameworks import load_ops
        from dlbench.measure.correctness import compare
        from dlbench.measure.timing import steady_state_and_output

        spec = get_model(cell.model)
        optimization = recipes.optimization(self.recipes_of, cell.optimization, cell.framework)
        precision = optimization.precision.name
        problem = backend.precision_problem(precision)
        if problem:
            return {"status": "unsupported", "reason": problem}
        ids, weights, reference_file, expected = transformer_inputs(
            backend, cell, settings["seed"], inputs)
        ops: InferenceOps = load_ops(backend, "inference")
        backend.reset_device_memory()  # peaks of this cell only (in a group, too)
        memory = clock.memory
        if memory is not None:
            memory.set_device(backend.memory_counters())
        # The setting's attention, or the recipe's own (PyTorch's -sdpa recipes).
        attention_asked = optimization.recipe.attention_of(settings.get("attention", "sdpa"))
        try:
            model, reused = _GroupModel.get(
                (cell.framework, cell.model, cell.device, cell.optimization, weights,
                 settings["seed"], attention_asked),
                lambda: ops.build(spec, settings["seed"], optimization, weights,
                                  attention=attention_asked))
            model_inputs = ops.inputs(ids)
            clock.mark("model_built_s")  # then tracing, compiling: model_ready_s
            ops.same_attention_work(model, model_inputs)
            start = time.perf_counter()
            step = prepare(ops, model, model_inputs, optimization,  # tracing, conversion
                           frameworks.get(cell.framework).default_inference)
            prepare_s = time.perf_counter() - start
            clock.mark("model_ready_s")
            if memory is not None:
                memory.end("load")
                memory.resident("after_model")
            timing, output = steady_state_and_output(
                step, backend.synchronize, settings, clock, backend.device_timer(),
                min_warmup=optimization.recipe.min_warmup(cell.device))
            correctness = None
            if expected is not None:  # the output of the last timed call
                correctness = compare(ops.to_numpy(output), expected, reference_file,
                                      optimization.precision)
            del output
            attention = ops.attention(model)
            compilation = ops.compilation()
            mixed = None
            if precision in MIXED:  # one more, eager call, after everything is measured
                mixed = ops.precision_ops(model, model_inputs, optimization)
        finally:
            ops.release()
        # Time spent making the step fast, beyond one steady-state call.
        compile_s = max(0.0, prepare_s + timing["cold_start_s"] - timing["median_ms"] / 1e3)
        return {
            "optimization": {**optimization.describe(cell.device),
                             "description": optimization.description},
            "attention": {"setting": attention_asked, **attention},
            "timing": {"prepare_s": prepare_s, "compile_s": compile_s, **timing},
            "throughput": throughput(cell, timing["median_ms"]),
            "correctness": correctness,
            "compilation": compilation,
            "mixed_precision": mixed,
            "memory": _memory(backend, memory),
            "details": ops.versions(),
            "process": {"model_reused": reused},
        }

    def combine(self, records: list[dict]) -> dict:
        final = super().combine(records)
        if len(records) > 1 and final["status"] == "ok":
            cell = _cell(final["params"])
            final["throughput"] = throughput(cell, final["timing"]["median_ms"])
        return final

    def iteration_flops(self, model: str, sizes: dict[str, int]) -> float | None:
        """A forward pass's FLOPs (dlbench.measure.flops.step_flops)."""
        from dlbench.measure import flops

        try:
            return flops.step_flops(self.name, model, sizes["batch"], sizes.get("seqlen"))
        except (KeyError, ValueError):  # a model without a count
            return None

    # -- its part of the result schema -------------------------------------------------------

    def result_schema(self) -> dict:
        schema = super().result_schema()
        schema["properties"] = {
            "throughput": THROUGHPUT_SCHEMA,
            "correctness": CORRECTNESS_SCHEMA,
            "attention": {
                "type": "object",
                "description": "transformers' attention implementation that ran, and whether "
                               "the attention mask was applied (the same in every recipe)",
                "required": ["implementation", "mask_applied"],
                "properties": {"setting": {"enum": ["sdpa", "eager"]},
                               "implementation": {"type": "string"},
                               "mask_applied": {"type": "boolean"},
                               "implementation_of": {"type": "string"}},
            },
            "compilation": COMPILATION_SCHEMA,
            "mixed_precision": {
                "type": ["object", "null"],
                "description": "bf16/fp16: the ops that computed in float32 and those in the "
                               "reduced type under the framework's mixed-precision mode",
                "required": ["float32_ops", "reduced_ops"],
                "properties": {"float32_ops": {"type": "array", "items": {"type": "string"}},
                               "reduced_ops": {"type": "array", "items": {"type": "string"}}},
            },
        }
        schema["ok_requires"] = ["throughput"]
        return schema


class _GroupModel:
    """The model of the cells of a group (measurement.process: per_group), built by the
    first and used by the others: they differ only in their inputs' sizes, so the same
    weights, precision and attention serve them all, and a process that serves several
    sizes holds one model too. Each cell still applies its recipe (a trace, a compilation)
    for its own shapes, with its caches released after it (the ops' `release`)."""

    key: tuple | None = None
    model: object = None

    @classmethod
    def get(cls, key: tuple, build) -> tuple[object, bool]:
        """The model of `key`, and whether an earlier cell built it."""
        if cls.key == key:
            return cls.model, True
        cls.key = cls.model = None  # the earlier group's model goes before this one comes
        gc.collect()
        cls.model, cls.key = build(), key
        return cls.model, False


def _memory(backend, memory) -> dict:
    """The memory section's scenario part: the phases (host; on a GPU the framework's own
    device figures too) and, on a GPU, the framework's peaks over the whole cell."""
    device = backend.device_memory() or {}
    if memory is None:
        return device
    # Where the framework's counters were reset by phase, the peaks over the whole cell come
    # from the phases; a framework whose peaks cannot be reset (JAX) keeps its own.
    cell_peaks = memory.device_cell_peaks_mb()
    if cell_peaks:
        device = {k: v for k, v in device.items() if not k.endswith("_peak_mb")}
    return {**device, **memory.values(),
            **{f"device_{key}_peak_mb": value for key, value in cell_peaks.items()}}


def throughput(cell: "Cell", median_ms: float) -> dict:
    batch, seqlen = cell.size("batch"), cell.size("seqlen")
    median_s = median_ms / 1e3
    return {"samples_per_s": batch / median_s, "tokens_per_s": batch * seqlen / median_s}


def _cell(params: dict) -> "Cell":
    from dlbench.scenarios.cell import Cell

    return Cell.from_params(params)


def cell(framework: str, model: str, device: str, batch: int, seqlen: int,
         optimization: str) -> "Cell":
    """An inference cell, named as in v1 (tests, scripts and the bench use this)."""
    from dlbench.scenarios.cell import Cell

    return Cell("inference", framework, model, device, optimization,
                (("batch", batch), ("seqlen", seqlen)))


register(Inference())
