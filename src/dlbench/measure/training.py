"""The training loop of a cell, the same for every framework: epochs of steps, each step
timed in two parts — waiting for the next batch from the input pipeline, and the step
itself (copy to the device, forward, loss, backward, optimizer step, synchronized) — and
the test accuracy after every epoch, with dropout off.

The first step (compilation, pipeline start-up) is timed on its own; the next
`warmup_iterations` steps are left out; every later step is a sample of the steady state.
"""

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import numpy as np

from dlbench.measure.stats import summarize


@dataclass
class Evaluation:
    """What the loop needs to test the model after each epoch."""

    logits: Callable[[], np.ndarray]  # the test images' logits, dropout off
    labels: np.ndarray


@dataclass
class Run:
    wait_ms: list[float] = field(default_factory=list)  # per timed step
    compute_ms: list[float] = field(default_factory=list)
    first_step_s: float = 0.0
    warmup: int = 0
    loop_s: float = 0.0  # wall time from the first timed step to the last step's end
    test_accuracy: list[float] = field(default_factory=list)  # per epoch
    train_loss: list[float] = field(default_factory=list)
    epoch_s: list[float] = field(default_factory=list)  # training time, evaluation apart
    eval_s: list[float] = field(default_factory=list)
    time_to_accuracy_s: float | None = None  # training time until the target was reached

    def timing(self) -> dict:
        """The timing section: a step's full time (wait + compute) is the sample."""
        samples = [w + c for w, c in zip(self.wait_ms, self.compute_ms, strict=True)]
        total = sum(samples)
        return {
            "cold_start_s": self.first_step_s, "warmup_iterations": self.warmup,
            "iterations": len(samples), "loop_s": self.loop_s, "samples_ms": samples,
            **summarize(samples),
            "breakdown": {
                name: {"samples_ms": part, "share": sum(part) / total if total else 0.0,
                       **summarize(part)}
                for name, part in (("input_wait", self.wait_ms), ("compute", self.compute_ms))
            },
        }


def train(epochs: int, batches: Callable[[int], Iterator], step: Callable,
          synchronize: Callable[[], None], mean_loss: Callable[[list], float],
          evaluation: Evaluation, steps_per_epoch: int, warmup: int, target_accuracy: float,
          mark: Callable[[str], None]) -> Run:
    """Train for `epochs`; `mark` is called when the first timed step starts."""
    clock = time.perf_counter
    run = Run(warmup=max(0, min(warmup, epochs * steps_per_epoch - 2)))
    done, loop_start, trained_s = 0, None, 0.0
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
            losses.append(step(batch))
            synchronize()
            t2 = clock()
            if done == 0:
                run.first_step_s = t2 - t0
            elif done > run.warmup:
                run.wait_ms.append((t1 - t0) * 1e3)
                run.compute_ms.append((t2 - t1) * 1e3)
                run.loop_s = t2 - loop_start
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
    return run
