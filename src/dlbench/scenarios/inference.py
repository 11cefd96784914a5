"""Inference: build the model, apply the optimization, time the first call apart, warm up,
then the timed loop; finally check the output against the reference."""

import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from dlbench.frameworks import Backend, prepare
from dlbench.matrix import Cell
from dlbench.measure.correctness import compare, load_reference
from dlbench.measure.stats import summarize
from dlbench.measure.timing import PhaseClock, time_call, timed_loop
from dlbench.models import ModelSpec, get_model
from dlbench.optimizations import OPTIMIZATIONS


@dataclass(frozen=True)
class Settings:
    warmup_iterations: int
    min_duration_s: float
    min_iterations: int
    seed: int = 0
    # The shared weights (dlbench.reference), and the reference output of this model,
    # batch and length; without them the weights are random from the seed and the
    # output is not checked.
    weights: Path | None = None
    reference: Path | None = None


# Ids below this are special in the registry's vocabularies (padding, unknown, separators,
# masks): ordinary text has none, and some models treat them apart (XLM masks its padding
# id out, RoBERTa skips it when numbering positions).
FIRST_ORDINARY_TOKEN = 16


def token_ids(spec: ModelSpec, batch: int, seqlen: int, seed: int) -> np.ndarray:
    """The same random, ordinary (non-special) token ids for every framework."""
    rng = np.random.default_rng(seed)
    return rng.integers(FIRST_ORDINARY_TOKEN, spec.vocab_size, size=(batch, seqlen),
                        dtype=np.int64)


def measure(backend: Backend, cell: Cell, settings: Settings, clock: PhaseClock) -> dict:
    """The cell's measurements, or its status and reason where the device cannot run it."""
    spec = get_model(cell.model)
    optimization = OPTIMIZATIONS[cell.optimization]
    problem = backend.optimization_problem(optimization)
    if problem:
        return {"status": "unsupported", "reason": problem}
    if settings.reference is not None and settings.weights is None and backend.name != "pytorch":
        raise ValueError("a reference output needs the shared weights (--weights) as well")
    ids = token_ids(spec, cell.batch, cell.seqlen, settings.seed)
    reference = None
    if settings.reference is not None:  # a stale reference fails now, not after timing
        reference = load_reference(settings.reference, ids, dict(spec.params))
    backend.reset_device_memory()  # peaks of this cell only (in a group, too)
    try:
        model = backend.build(spec, settings.seed, optimization, settings.weights)
        inputs = backend.inputs(ids)
        start = time.perf_counter()
        step = prepare(backend, model, inputs, optimization)  # tracing, conversion
        prepare_s = time.perf_counter() - start

        def call() -> None:
            step()
            backend.synchronize()

        clock.mark("model_ready_s")
        cold_start_s = time_call(call)  # compilation lands here, never in the loop
        for _ in range(settings.warmup_iterations):
            call()
        clock.mark("first_timed_iteration_s")
        timer = backend.device_timer()
        samples, device_samples = timed_loop(step, backend.synchronize, settings.min_duration_s,
                                             settings.min_iterations, timer)
        device_memory = backend.device_memory()
        correctness = None
        if reference is not None:  # one more call, in the steady state
            output = backend.to_numpy(step())
            correctness = compare(output, reference, settings.reference, optimization.precision)
    finally:
        backend.release()
    stats = summarize(samples)
    median_s = stats["median_ms"] / 1e3
    measured = {
        "optimization": {**optimization.describe(), "description": optimization.description},
        "timing": {
            "prepare_s": prepare_s,
            "cold_start_s": cold_start_s,
            # Time spent making the step fast, beyond one steady-state call.
            "compile_s": max(0.0, prepare_s + cold_start_s - median_s),
            "warmup_iterations": settings.warmup_iterations,
            "iterations": len(samples),
            "loop_s": sum(samples) / 1e3,
            "samples_ms": samples,
            **stats,
        },
        "throughput": {
            "samples_per_s": cell.batch / median_s,
            "tokens_per_s": cell.batch * cell.seqlen / median_s,
        },
        "correctness": correctness,
        # On a GPU: the framework's own peaks since the reset (NVML's view is sampled by the
        # supervisor).
        "memory": device_memory or {},
    }
    if device_samples:  # on a GPU: the same iterations timed on the device, by its events
        measured["timing"]["device_time"] = {
            "method": timer.method, "samples_ms": device_samples, **summarize(device_samples)}
    return measured
