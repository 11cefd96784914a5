"""The training loop of a cell, the same for every framework: epochs of steps, each step
timed in parts, the test accuracy after every epoch (dropout off), and the ablation.

A step's parts, as consecutive intervals of one clock:
  input_wait        waiting for the next batch from the input pipeline (its `next()`)
  copy              the batch to the device (on a GPU, a host-to-device copy)
  forward_backward  forward, loss and backward
  optimizer         the optimizer step
  step              forward, backward and optimizer as one, where they cannot be timed apart
                    (torch.compile of the whole step), or without a breakdown
  rest              what the loop does besides (keeping the loss; Python between parts)
With `breakdown`, every part ends with the device's synchronization (a no-op on the CPU;
on a GPU the price of knowing where time goes: bench/breakdown.py measures it); without,
the step is timed whole and only `input_wait` is told apart.

The first step (compilation, pipeline start-up) is timed on its own; the next
`warmup_iterations` are left out; every later step is a sample of the steady state.

The ablation, after the last epoch: the same model, optimizer and optimization, fed one
batch already in device memory (no decoding, no copy) — the throughput the input pipeline
could at most reach; `efficiency` = the real throughput over it.
"""

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from dlbench.measure.parts import breakdown as shares_of_steps
from dlbench.measure.stats import summarize
from dlbench.measure.timing import Stopping, timed_loop


class Step(Protocol):
    """A framework's training step, in parts."""

    separable: bool  # forward+backward and the optimizer step can be timed apart

    def to_device(self, batch) -> tuple[Any, Any]: ...

    def forward_backward(self, x, y) -> Any: ...

    def optimizer_step(self) -> None: ...

    def compute(self, x, y) -> Any:
        """Forward, backward and optimizer step as one; the loss (not read)."""

    def synthetic_batch(self, batch: int, spec) -> tuple[Any, Any]: ...


@dataclass
class Evaluation:
    """What the loop needs to test the model after each epoch."""

    logits: Callable[[], np.ndarray]  # the test images' logits, dropout off
    labels: np.ndarray


@dataclass
class Run:
    parts: dict[str, list[float]] = field(default_factory=dict)  # ms, per timed step
    totals_ms: list[float] = field(default_factory=list)  # each timed step, end to end
    first_step_s: float = 0.0
    warmup: int = 0
    loop_s: float = 0.0  # wall time from the first timed step to the last step's end
    test_accuracy: list[float] = field(default_factory=list)  # per epoch
    train_loss: list[float] = field(default_factory=list)
    epoch_s: list[float] = field(default_factory=list)  # training time, evaluation apart
    eval_s: list[float] = field(default_factory=list)
    time_to_accuracy_s: float | None = None  # training time until the target was reached

    def timing(self) -> dict:
        return timing(self.totals_ms, self.parts, self.first_step_s, self.warmup, self.loop_s)


def timing(totals_ms: list[float], parts: dict[str, list[float]], first_step_s: float,
           warmup: int, loop_s: float) -> dict:
    """The timing section: each step end to end is the sample; its parts beside it."""
    return {
        "cold_start_s": first_step_s, "warmup_iterations": warmup,
        "iterations": len(totals_ms), "loop_s": loop_s, "samples_ms": totals_ms,
        **summarize(totals_ms), "breakdown": shares_of_steps(parts, totals_ms),
    }


def train(epochs: int, batches: Callable[[int], Iterator], step: Step,
          synchronize: Callable[[], None], mean_loss: Callable[[list], float],
          evaluation: Evaluation, steps_per_epoch: int, warmup: int, target_accuracy: float,
          mark: Callable[[str], None], breakdown: bool = True) -> Run:
    """Train for `epochs`; `mark` is called when the first timed step starts and when the
    last one ends."""
    clock = time.perf_counter
    run = Run(warmup=max(0, min(warmup, epochs * steps_per_epoch - 2)))
    done, loop_start, trained_s = 0, None, 0.0
    apart = breakdown and step.separable
    for epoch in range(epochs):
        epoch_start, losses = clock(), []
        iterator = batches(epoch)
        while True:
            t0 = clock()
            batch = next(iterator, None)
            if batch is None:
                break
            t1 = clock()
            if done == run.warmup + 1:
                loop_start = t0
                mark("first_timed_iteration_s")
            stamps, loss = [t0, t1], None
            x, y = step.to_device(batch)
            if breakdown:
                synchronize()
                stamps.append(clock())
            if apart:
                loss = step.forward_backward(x, y)
                synchronize()
                stamps.append(clock())
                step.optimizer_step()
            else:
                loss = step.compute(x, y)
            synchronize()
            stamps.append(clock())
            losses.append(loss)
            stamps.append(clock())
            if done == 0:
                run.first_step_s = stamps[-1] - t0
            elif done > run.warmup:
                names = _part_names(breakdown, apart)
                for name, start, end in zip(names, stamps[:-1], stamps[1:], strict=True):
                    run.parts.setdefault(name, []).append((end - start) * 1e3)
                run.totals_ms.append((stamps[-1] - t0) * 1e3)
                run.loop_s = stamps[-1] - loop_start
            done += 1
        run.epoch_s.append(clock() - epoch_start)
        trained_s += run.epoch_s[-1]
        run.train_loss.append(mean_loss(losses))
        eval_start = clock()
        accuracy = float((evaluation.logits().argmax(axis=1) == evaluation.labels).mean())
        run.eval_s.append(clock() - eval_start)
        run.test_accuracy.append(accuracy)
        if run.time_to_accuracy_s is None and accuracy >= target_accuracy:
            run.time_to_accuracy_s = trained_s
    mark("timed_loop_end_s")
    return run


def _part_names(breakdown: bool, apart: bool) -> list[str]:
    if not breakdown:
        return ["input_wait", "step", "rest"]
    if apart:
        return ["input_wait", "copy", "forward_backward", "optimizer", "rest"]
    return ["input_wait", "copy", "step", "rest"]


def ablation(step: Step, spec, batch: int, synchronize: Callable[[], None],
             warmup: int, min_duration_s: float, min_iterations: int) -> dict:
    """The steps' throughput with the input pipeline replaced by one batch already on the
    device: the ceiling of any pipeline (same model, optimizer and optimization)."""
    x, y = step.synthetic_batch(batch, spec)
    for _ in range(max(1, warmup)):
        step.compute(x, y)
        synchronize()
    samples = timed_loop(lambda: step.compute(x, y), synchronize,
                         Stopping(min_duration_s, min_iterations)).host
    stats = summarize(samples)
    return {"input": "one batch already in device memory: no decoding, no copy",
            "iterations": len(samples), "samples_ms": samples,
            "samples_per_s": batch / (stats["median_ms"] / 1e3), **stats}
