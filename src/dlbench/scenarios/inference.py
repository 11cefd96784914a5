"""Inference: build the model, time the first call apart, warm up, then the timed loop."""

from dataclasses import dataclass

import numpy as np

from dlbench.frameworks import Backend
from dlbench.matrix import Cell
from dlbench.measure.stats import summarize
from dlbench.measure.timing import PhaseClock, time_call, timed_loop
from dlbench.models import ModelSpec, get_model


@dataclass(frozen=True)
class Settings:
    warmup_iterations: int
    min_duration_s: float
    min_iterations: int
    seed: int = 0


def token_ids(spec: ModelSpec, batch: int, seqlen: int, seed: int) -> np.ndarray:
    """The same random token ids for every framework."""
    rng = np.random.default_rng(seed)
    return rng.integers(0, spec.vocab_size, size=(batch, seqlen), dtype=np.int64)


def measure(backend: Backend, cell: Cell, settings: Settings, clock: PhaseClock) -> dict:
    spec = get_model(cell.model)
    model = backend.build(spec, settings.seed)
    inputs = backend.inputs(token_ids(spec, cell.batch, cell.seqlen, settings.seed))
    step = backend.recipes[cell.optimization](model, inputs)

    def call() -> None:
        step()
        backend.synchronize()

    clock.mark("model_ready_s")
    cold_start_s = time_call(call)  # tracing and compilation land here, never in the loop
    for _ in range(settings.warmup_iterations):
        call()
    clock.mark("first_timed_iteration_s")
    samples = timed_loop(call, settings.min_duration_s, settings.min_iterations)
    stats = summarize(samples)
    median_s = stats["median_ms"] / 1e3
    return {
        "timing": {
            "cold_start_s": cold_start_s,
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
    }
