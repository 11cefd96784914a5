"""Text generation: a decoder's greedy decoding of a fixed number of new tokens.

Cells: framework × model × device × batch × prompt length × new tokens × optimization
(the generation recipes of dlbench.catalogue.recipes). A cell builds the model with its
language-model head (tied to the word embeddings) from the shared seeded weights, takes
the same seeded prompt token ids as every framework (inference's random ordinary ids) and
generates exactly `new_tokens` tokens greedily (min = max new tokens, no stop at the
end-of-text token). One timed iteration is one whole generation: the first call (tracing,
compilation) is timed on its own, then the warm-up and the timed loop, as in inference.

Beside the whole generation's latency, a cell records the time to the first token (the
prompt's forward pass and the first token) and the time per output token: where the
framework exposes each decoding step (op by op, Python's loop), every step is timestamped
and the record keeps the time of each position; where generation is one compiled call,
the first token is timed by a one-token generation of the same recipe, and the time per
token is (whole − first token) / (new tokens − 1). The record says which.

Token for token: the generated ids of the last timed call are compared with the
reference's (PyTorch eager, fp32, on the CPU, the same weights and prompt;
`python -m dlbench.reference generation`): in fp32 every id must be equal, and a cell that
diverges records the first position where it did and is a wrong answer; in a reduced
precision the first divergence and the share of equal tokens are recorded, not judged.
"""

import statistics
import time
from pathlib import Path
from typing import TYPE_CHECKING

from dlbench.catalogue import frameworks, recipes
from dlbench.catalogue.models import MODELS, get_model
from dlbench.files import paths
from dlbench.scenarios import Axis, Scenario, median_over, register
from dlbench.scenarios._compilation import COMPILATION_SCHEMA
from dlbench.scenarios._reference import SharedReference
from dlbench.scenarios.generation_ops import GenerationOps
from dlbench.scenarios.inference import (
    THROUGHPUT_SCHEMA,
    _memory,
    token_ids,
    transformer_problem,
)

if TYPE_CHECKING:
    import numpy as np

    from dlbench.scenarios.cell import Cell

# The registry's families whose models are decoders (a causal language model to generate
# with): the others' cells are unsupported, with the reason.
DECODER_FAMILIES = ("gpt2",)
# How the time per output token was measured (the record's `generation.per_token_method`:
# `steps` in results from before FIRST_TOKEN, which every framework now measures alike).
STEPS, WHOLE_MINUS_FIRST = "steps", "whole_minus_first"
# A generation's figures from the decoding steps' stamps, where the framework exposes them.
STAMPS = ("per_position_ms", "per_position_p90_ms", "steps")
# The time to the first token (`generation.first_token_method`), in every framework and
# recipe: generate()'s first step as a call of its own, through the recipe's (compiled)
# model — the prompt's forward pass with the key-value cache generate gives it and the
# greedy choice of the first token.
FIRST_TOKEN = ("generate()'s first step timed on its own: the prompt's forward pass with "
               "generate's key-value cache, and the greedy choice")
# Warm-up generations of a compiled recipe, whatever measurement.warmup_iterations says:
# torch.compile with a static cache compiled once more at the second generation (tiny-gpt2,
# torch 2.13, transformers 4.57), which must land in the warm-up, not in the timed loop.
COMPILED_WARMUP = 2


def problem(cell: "Cell") -> str | None:
    """Why a registry model cannot generate in this cell (None if it can)."""
    spec = get_model(cell.model)
    if spec.family not in DECODER_FAMILIES:
        return (f"{cell.model} ({spec.family}) is not a decoder: generation needs a causal "
                f"language model ({', '.join(DECODER_FAMILIES)} family)")
    total = cell.size("seqlen") + cell.size("new_tokens")
    if spec.max_positions is not None and total > spec.max_positions:
        return (f"prompt {cell.size('seqlen')} + {cell.size('new_tokens')} new tokens exceeds "
                f"{cell.model}'s maximum of {spec.max_positions} positions")
    return None


def compare_ids(ids: "np.ndarray", reference: "np.ndarray", reference_file: str | None,
                precision: str) -> dict:
    """The generated ids against the reference's, token for token: the first position
    where any row diverged (None: none), the share of equal tokens and, in fp32, the
    verdict (every id equal); reduced precisions are recorded, not judged."""
    import numpy as np

    from dlbench.measure.correctness import REFERENCE

    if ids.shape != reference.shape:
        raise ValueError(f"generated ids {ids.shape} differ in shape from the reference's "
                         f"{reference.shape} ({reference_file})")
    equal = ids == reference
    diverged = ~equal.all(axis=0)
    first = int(np.argmax(diverged)) if diverged.any() else None
    rows = [int(np.argmax(~row)) if not row.all() else None for row in equal]
    judged = precision == "fp32"
    return {
        "reference": REFERENCE, "reference_file": str(reference_file), "precision": precision,
        "tokens": int(ids.size), "equal_tokens": int(equal.sum()),
        "share_equal": float(equal.mean()), "first_divergence": first,
        "first_divergence_per_row": rows,
        "required": judged,
        "within_tolerance": bool(first is None) if judged else None,
        "note": ("fp32: every generated id must equal the reference's" if judged else
                 f"{precision}: greedy decoding may take another token where two logits "
                 "are within rounding; recorded, not judged"),
    }


class _Recorder:
    """Wraps a decoder's call: the start of every call, and its steps' stamps after it."""

    def __init__(self, decoder):
        self.decoder = decoder
        self.calls: list[tuple[float, list[float] | None]] = []

    def __call__(self):
        start = time.perf_counter()
        output = self.decoder.call()
        stamps = self.decoder.stamps() if self.decoder.stamps else None
        self.calls.append((start, stamps))
        return output


def per_token_from_whole(whole_ms: list[float], first_ms: float, new: int) -> dict:
    """The time per output token where generation is one compiled call: (whole − first
    token) / (new tokens − 1), per timed generation, against the median of the first token
    timed apart. Where the whole generation's median is not above the first token's, the
    decoding steps are inside the difference between two separately timed programs (seen
    with tiny-gpt2: 0.520 ms whole, 0.589 ms its first token): no time per token is
    published (`per_token_ms` null, with `per_token_note`), never a negative one."""
    from dlbench.measure.stats import summarize

    per_token = [(x - first_ms) / (new - 1) for x in whole_ms]
    stats = summarize(per_token)
    section = {"per_token": {**stats, "samples_ms": per_token},
               "per_token_ms": stats["median_ms"]}
    if stats["median_ms"] <= 0:
        section["per_token_ms"] = None
        section["per_token_note"] = (
            f"not resolved: the whole generation ({statistics.median(whole_ms):.3g} ms, "
            f"median) took no longer than its first token alone ({first_ms:.3g} ms), timed "
            f"apart; its {new - 1} decoding steps are inside that difference")
    return section


def step_times(calls: list[tuple[float, list[float] | None]]) -> dict:
    """From timestamped calls: each call's time to the first token and mean time per
    token (their statistics and samples), and every position's median and 90th percentile
    step time (position 1 is the second new token)."""
    import numpy as np

    from dlbench.measure.stats import summarize

    first = [(stamps[0] - start) * 1e3 for start, stamps in calls]
    steps = np.array([np.diff(stamps) * 1e3 for _, stamps in calls])
    per_token = steps.mean(axis=1).tolist()
    return {"first": {**summarize(first), "samples_ms": first},
            "per_token": {**summarize(per_token), "samples_ms": per_token},
            "per_position_ms": np.median(steps, axis=0).tolist(),
            "per_position_p90_ms": np.percentile(steps, 90, axis=0).tolist()}


class Generation(SharedReference, Scenario):
    name = "generation"
    ops_interface = GenerationOps
    description = ("greedy text generation with a decoder: time to the first token, time per "
                   "output token, end-to-end latency and tokens/s")
    axes = (
        Axis("batch", "batch_sizes", "b", "batch sizes (prompts generated together)"),
        # The prompt is the cell's sequence: the axis shares inference's name (summary
        # column, `dlbench run --seqlen`) and reads `p` in a cell id.
        Axis("seqlen", "prompt_lengths", "p", "prompt lengths in tokens"),
        Axis("new_tokens", "new_tokens", "n", "new tokens generated per prompt (at least 2)"),
    )
    # A cell is seconds of decoding after seconds of start-up: one process may measure a
    # recipe's sizes, and side by side the recipes take turns (measurement.process).
    groupable = True
    summary_sections = {"throughput": "", "correctness": "correctness_",
                        "attention": "attention_", "generation": "generation_",
                        "compilation": "compilation_"}

    def models(self) -> list[str]:
        return list(MODELS)

    def validate(self, config: dict) -> list[str]:
        section = config.get(self.name) or {}
        few = [n for n in section.get("new_tokens", []) if n < 2]
        return ([f"generation: new_tokens {few}: at least 2 (the time per output token is "
                 "the time after the first)"] if few else [])

    def unsupported_reason(self, cell: "Cell") -> str | None:
        optimization = recipes.optimization(self.recipes_of, cell.optimization, cell.framework)
        return (optimization.unsupported_reason(cell.framework, cell.device)
                or problem(cell) or transformer_problem(cell, optimization.precision.name))

    # -- the shared weights and the reference's ids (dlbench.reference) --------------------

    def reference_name(self, cell: "Cell") -> str:
        return paths.reference_generation_name(cell.size("batch"), cell.size("seqlen"),
                                               cell.size("new_tokens"))

    # -- measuring ---------------------------------------------------------------------------

    def measure(self, backend, cell: "Cell", settings: dict, clock, inputs: dict) -> dict:
        from dlbench.frameworks import load_ops
        from dlbench.measure.correctness import load_reference
        from dlbench.measure.stats import summarize
        from dlbench.measure.timing import steady_state, steady_state_and_output

        spec = get_model(cell.model)
        optimization = recipes.optimization(self.recipes_of, cell.optimization, cell.framework)
        precision = optimization.precision.name
        problem_ = backend.precision_problem(precision)
        if problem_:
            return {"status": "unsupported", "reason": problem_}
        batch, prompt, new = cell.size("batch"), cell.size("seqlen"), cell.size("new_tokens")
        ids = token_ids(spec, batch, prompt, settings["seed"])
        weights, reference_file = inputs.get("weights"), inputs.get("reference")
        if (reference_file is not None and weights is None
                and backend.name != frameworks.REFERENCE_FRAMEWORK):
            raise ValueError("a reference needs the shared weights (--weights) as well")
        expected = (None if reference_file is None
                    else load_reference(reference_file, ids, dict(spec.params)))
        ops: GenerationOps = load_ops(backend, "generation")
        backend.reset_device_memory()
        memory = clock.memory
        if memory is not None:
            memory.set_device(backend.memory_counters())
        try:
            # The setting's attention, or the recipe's own (PyTorch's -sdpa recipes).
            asked = optimization.recipe.attention_of(settings.get("attention", "sdpa"))
            model = ops.build(spec, settings["seed"], optimization, weights, attention=asked)
            clock.mark("model_built_s")  # side by side: the start-up ends, the rest alone
            attention = {"setting": asked, **ops.attention(model)}
            prompt_inputs = ops.inputs(ids)
            start = time.perf_counter()
            decoder = ops.decoder(model, prompt_inputs, new, optimization)
            prepare_s = time.perf_counter() - start
            recorder = _Recorder(decoder)
            clock.mark("model_ready_s")
            if memory is not None:
                memory.end("load")
                memory.resident("after_model")
            timing, output = steady_state_and_output(
                recorder, backend.synchronize, settings, clock, backend.device_timer(),
                min_warmup=COMPILED_WARMUP if optimization.recipe.compiled else 0)
            generated = ops.new_ids(output, prompt)
            del output
            timed = recorder.calls[len(recorder.calls) - timing["iterations"]:]
            traces = decoder.traces() if decoder.traces else None
            compilation = ops.compilation()  # the generation's own, before its first step's
            # The time to the first token, one definition in every framework and recipe:
            # generate's first step timed on its own (FIRST_TOKEN); the time per output
            # token, (whole − first) / (new − 1). Decoding steps' stamps, where the
            # framework exposes them, stay beside it (per_position_ms, `steps`).
            first = steady_state(decoder.first, backend.synchronize, settings, _NoClock())
            section = {"per_token_method": WHOLE_MINUS_FIRST, "first_token_method": FIRST_TOKEN,
                       "first_token": {**summarize(first["samples_ms"]),
                                       "samples_ms": first["samples_ms"],
                                       "cold_start_s": first["cold_start_s"]},
                       **per_token_from_whole(timing["samples_ms"], first["median_ms"], new),
                       "per_position_ms": None, "per_position_p90_ms": None, "steps": None}
            if decoder.stamps is not None:
                steps = step_times(timed)
                section |= {"per_position_ms": steps["per_position_ms"],
                            "per_position_p90_ms": steps["per_position_p90_ms"],
                            "steps": {"first_token_ms": steps["first"]["median_ms"],
                                      "per_token_ms": steps["per_token"]["median_ms"]}}
            other = other_prompt(decoder, ops, spec, batch, prompt, new, settings["seed"],
                                 backend.synchronize)
        finally:
            ops.release()
        correctness = (None if expected is None else
                       compare_ids(generated, expected, reference_file, precision))
        compile_s = max(0.0, prepare_s + timing["cold_start_s"] - timing["median_ms"] / 1e3)
        return {
            "optimization": {**optimization.describe(cell.device),
                             "description": optimization.description},
            "timing": {"prepare_s": prepare_s, "compile_s": compile_s, **timing},
            "throughput": throughput(cell, timing["median_ms"]),
            "attention": attention,
            "generation": {
                "how": decoder.how, "decoding": "greedy", "new_tokens": new,
                "prompt_length": prompt, "batch": batch,
                "first_token_ms": section["first_token"]["median_ms"],
                "tokens_per_s_ci95": _tokens_interval(batch * new, timing),
                "traces": traces, "other_prompt": other, **section,
                "ids_first_row": generated[0].tolist(),
            },
            "correctness": correctness,
            "compilation": compilation,
            "memory": _memory(backend, memory),
            "details": ops.versions(),
        }

    def combine(self, records: list[dict]) -> dict:
        from dlbench.measure.stats import summarize

        final = super().combine(records)
        if len(records) > 1 and final["status"] == "ok":
            cell = _cell(final["params"])
            final["throughput"] = throughput(cell, final["timing"]["median_ms"])
            section = final["generation"]
            section["tokens_per_s_ci95"] = _tokens_interval(
                cell.size("batch") * cell.size("new_tokens"), final["timing"])
            # The first token and the time per token of every process: their samples
            # pooled, and the figure each table shows, the geometric mean of the processes'
            # own, as the answer takes the whole generation's (dlbench.analysis.rounds.level;
            # the pooled samples' median set one framework 5-7% ahead per token where the
            # answer had a tie, and its rounds disagreed on the order), each process's beside.
            for key in ("first_token", "per_token"):
                samples = [x for r in records for x in r["generation"][key]["samples_ms"]]
                section[key] = {**section[key], **summarize(samples), "samples_ms": samples}
            firsts = [r["generation"]["first_token_ms"] for r in records]
            section["first_token_ms"] = statistics.geometric_mean(firsts)
            section["rounds_first_token_ms"] = firsts
            per_token = [r["generation"].get("per_token_ms") for r in records]
            if all(v is not None and v > 0 for v in per_token):
                section["per_token_ms"] = statistics.geometric_mean(per_token)
                section["rounds_per_token_ms"] = per_token
            else:
                section["per_token_ms"] = None
                section.setdefault("per_token_note", next(
                    (r["generation"]["per_token_note"] for r in records
                     if r["generation"].get("per_token_note")),
                    "not resolved in every process"))
            # The decoding steps' stamps of every round, each its calls' median.
            section.update(median_over([{key: r["generation"].get(key) for key in STAMPS}
                                        for r in records]))
        return final

    # -- the work of a generation (the report's efficiency section) ---------------------------

    def iteration_flops(self, model: str, sizes: dict[str, int]) -> float | None:
        """The whole generation's FLOPs: the prefill and every decoding step with its
        growing cache (dlbench.measure.flops.generation_flops)."""
        counted = _generation_flops(model, sizes)
        return None if counted is None else counted["total"]

    def flops_phases(self, model: str, sizes: dict[str, int]) -> list[tuple[str, float, str]]:
        """The prefill (timed as the time to the first token) and the mean decoding step
        (timed as the time per output token), each with its FLOPs."""
        counted = _generation_flops(model, sizes)
        if counted is None:
            return []
        steps = counted["steps"]
        return [("prefill (first token)", counted["prefill"], "generation_first_token_ms"),
                (f"decoding step (mean of {len(steps)}; "
                 f"{steps[0] / 1e6:,.1f} → {steps[-1] / 1e6:,.1f} MFLOP as the cache "
                 "grows)",
                 sum(steps) / len(steps), "generation_per_token_ms")]

    # -- its part of the result schema -------------------------------------------------------

    def result_schema(self) -> dict:
        schema = super().result_schema()
        stats = {"type": "object", "required": ["median_ms", "median_ci95_ms"]}
        positions = {"type": ["array", "null"], "items": {"type": "number"}}
        schema["properties"] = {
            "throughput": THROUGHPUT_SCHEMA,
            "compilation": COMPILATION_SCHEMA,
            "attention": {
                "type": "object",
                "description": "transformers' attention implementation that ran (the answer "
                               "says where the frameworks' differ)",
                "required": ["implementation"],
                "properties": {"setting": {"enum": ["sdpa", "eager"]},
                               "implementation": {"type": "string"},
                               "implementation_of": {"type": "string"}},
            },
            "correctness": {
                "type": ["object", "null"],
                "description": "the generated ids against the reference's (PyTorch eager "
                               "fp32 on the CPU); null where no reference was given",
                "required": ["reference", "precision", "tokens", "equal_tokens",
                             "share_equal", "first_divergence", "required",
                             "within_tolerance"],
                "properties": {
                    "tokens": {"type": "integer", "minimum": 1},
                    "equal_tokens": {"type": "integer", "minimum": 0},
                    "share_equal": {"type": "number", "minimum": 0, "maximum": 1},
                    "first_divergence": {"type": ["integer", "null"], "minimum": 0},
                    "required": {"type": "boolean"},
                    "within_tolerance": {"type": ["boolean", "null"]},
                },
            },
            "generation": {
                "type": "object",
                "description": "time to the first token, time per output token (each "
                               "decoding step's where the framework exposes them)",
                "required": ["how", "per_token_method", "first_token", "per_token",
                             "first_token_ms", "per_token_ms", "new_tokens",
                             "tokens_per_s_ci95"],
                "properties": {
                    "how": {"type": "string"},
                    "per_token_method": {"enum": [STEPS, WHOLE_MINUS_FIRST]},
                    "first_token_method": {"type": "string"},
                    "steps": {
                        "type": ["object", "null"],
                        "description": "where the framework exposes its decoding steps: "
                                       "the first token and the mean step inside the "
                                       "whole generation, from their stamps",
                        "properties": {"first_token_ms": {"type": "number"},
                                       "per_token_ms": {"type": "number"}}},
                    "first_token": stats, "per_token": stats,
                    "first_token_ms": {"type": "number", "exclusiveMinimum": 0},
                    # null: the whole generation minus its first token, timed apart,
                    # was not above zero (per_token_note says so)
                    "per_token_ms": {"type": ["number", "null"]},
                    "per_token_note": {"type": "string"},
                    "new_tokens": {"type": "integer", "minimum": 2},
                    "tokens_per_s_ci95": {"type": "array", "minItems": 2, "maxItems": 2},
                    "per_position_ms": positions, "per_position_p90_ms": positions,
                    "traces": {"type": ["integer", "null"], "minimum": 0},
                    "other_prompt": {
                        "type": ["object", "null"],
                        "description": "after the timed cell, one generation with a prompt "
                                       "of another length: the compiled programs it added "
                                       "(null: the recipe compiles nothing)",
                        "required": ["prompt_length", "counted", "new_compilations",
                                     "recompiled", "call_s"],
                        "properties": {
                            "prompt_length": {"type": "integer", "minimum": 1},
                            "new_compilations": {"type": "integer", "minimum": 0},
                            "recompiled": {"type": "boolean"},
                            "call_s": {"type": "number", "minimum": 0},
                        },
                    },
                },
            },
        }
        schema["ok_requires"] = ["throughput", "generation"]
        return schema


def other_prompt_length(prompt: int, new_tokens: int, max_positions: int | None) -> int | None:
    """The prompt length of the generation after the timed cell that asks whether another
    length compiles anew: one token shorter (one longer for a one-token prompt; None
    where that does not fit the model's positions)."""
    if prompt > 1:
        return prompt - 1
    fits = max_positions is None or prompt + 1 + new_tokens <= max_positions
    return prompt + 1 if fits else None


def other_prompt(decoder, ops, spec, batch: int, prompt: int, new_tokens: int, seed: int,
                 synchronize) -> dict | None:
    """After the timed cell, one generation with a prompt of another length through the
    same compiled functions: how many compiled programs (traces, graphs) it added, and its
    time. A cell has one prompt length; this says whether a process that generates with
    several would compile again. None where the recipe compiles nothing."""
    if decoder.call_with is None or decoder.compilations is None:
        return None
    length = other_prompt_length(prompt, new_tokens, spec.max_positions)
    if length is None:
        return None
    other = ops.inputs(token_ids(spec, batch, length, seed))
    before = decoder.compilations()
    start = time.perf_counter()
    decoder.call_with(other)
    synchronize()
    call_s = time.perf_counter() - start
    after = decoder.compilations()
    return {"prompt_length": length, "counted": decoder.counted,
            "compilations_before": before, "compilations_after": after,
            "new_compilations": after - before, "recompiled": after > before,
            "call_s": call_s}


class _NoClock:
    """A clock that keeps no marks (the first-token loop is not a phase of the cell)."""

    memory = None

    def mark(self, phase: str) -> None:
        pass


def _tokens_interval(tokens: int, timing: dict) -> list[float | None]:
    """Generated tokens per second from the latency's 95% interval: [low, high]; no upper
    bound (None) where the latency's interval reaches 0 (two processes far apart)."""
    low, high = timing["median_ci95_ms"]
    return [tokens / (high / 1e3), tokens / (low / 1e3) if low > 0 else None]


def throughput(cell: "Cell", median_ms: float) -> dict:
    """Prompts per second and generated tokens per second (batch × new tokens / latency)."""
    batch, new = cell.size("batch"), cell.size("new_tokens")
    median_s = median_ms / 1e3
    return {"samples_per_s": batch / median_s, "tokens_per_s": batch * new / median_s}


def reference_ids(model: str, batch: int, prompt: int, new_tokens: int, seed: int,
                  weights: Path, threads: int) -> tuple["np.ndarray", "np.ndarray"]:
    """The reference's generated ids (PyTorch eager, fp32, CPU) and the prompt: what
    `python -m dlbench.reference generation` writes."""
    from dlbench.catalogue.frameworks import REFERENCE_FRAMEWORK
    from dlbench.frameworks import load_backend, load_ops

    spec = get_model(model)
    ids = token_ids(spec, batch, prompt, seed)
    backend = load_backend(REFERENCE_FRAMEWORK, "cpu", threads, 1)
    ops: GenerationOps = load_ops(backend, "generation")
    eager = recipes.optimization("generation", "eager", REFERENCE_FRAMEWORK)
    try:
        built = ops.build(spec, seed, eager, weights)
        output = ops.decoder(built, ops.inputs(ids), new_tokens, eager).call()
        return ops.new_ids(output, prompt), ids
    finally:
        ops.release()


def _generation_flops(model: str, sizes: dict[str, int]) -> dict | None:
    from dlbench.measure import flops

    try:
        return flops.generation_flops(model, sizes["batch"], sizes["seqlen"],
                                      sizes["new_tokens"])
    except KeyError:  # a model without a count
        return None


def _cell(params: dict) -> "Cell":
    from dlbench.scenarios.cell import Cell

    return Cell.from_params(params)


register(Generation())
