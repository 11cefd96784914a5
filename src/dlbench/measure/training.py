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

Throughput is work over wall time: timed steps × batch over the wall time of the timed
steps (each epoch's span from its first timed step to its last step's end; the evaluation
between epochs left out). A pipeline's stalls (bursty: the first batches of an epoch)
count in full, as they do in the input-wait share; the median step's rate is kept beside
it.

The ablation: the same model, optimizer and optimization running exactly the timed
program (forward + backward, then the optimizer step, where the breakdown times them
apart; else the step as one), fed real batches of the cell's own pipeline — the first
epoch's, kept as the step received them: decoded, augmented and on the device in the
recipe's layout — the throughput any pipeline could at most reach, on the same statistic;
`efficiency` = the real throughput over it. It is timed in blocks, one after each epoch's
evaluation, each with its share of the loop's minimum duration and iterations, so that a
machine whose speed drifts over the cell's seconds slows both sides alike (timed after the
last epoch, in-memory pipelines read as partly input-bound or beat their ceiling:
config/README.md, *Training*). Each block starts from a snapshot of the step's state and
restores it after: the training goes on as it would have without the block (but for
TensorFlow's dropout masks, drawn from a state inside its ops). The snapshot and the kept
batches count in the cell's memory peaks, and the loop's window (the load samples'
and the profile's) holds the blocks. A ceiling that the real run beats (the 95% interval
of the efficiency above 1) is flagged: the ablation is then no ceiling.
"""

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from dlbench.measure.parts import breakdown as shares_of_steps
from dlbench.measure.stats import between_processes, summarize, t95
from dlbench.measure.timing import Stopping, timed_loop


class TrainingStep(Protocol):
    """A framework's training step, in parts."""

    separable: bool  # forward+backward and the optimizer step can be timed apart

    def to_device(self, batch) -> tuple[Any, Any]: ...

    def forward_backward(self, x, y) -> Any: ...

    def optimizer_step(self) -> None: ...

    def compute(self, x, y) -> Any:
        """Forward, backward and optimizer step as one; the loss (not read)."""

    def snapshot(self) -> Any:
        """A copy of all that a step changes: the weights, the optimizer's state and count
        of updates, the random state its dropout draws from."""

    def restore(self, snapshot: Any) -> None:
        """The step's state as in the snapshot, again (in place: a compiled program keeps
        reading the same variables)."""


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
    # Wall time from the first timed step to the last step's end, or with the ablation to
    # the end of its last block (its blocks and the evaluations inside).
    loop_s: float = 0.0
    wall_s: float = 0.0  # wall time of the timed steps: loop_s less the evaluations
    test_accuracy: list[float] = field(default_factory=list)  # per epoch
    train_loss: list[float] = field(default_factory=list)
    epoch_s: list[float] = field(default_factory=list)  # training time, evaluation apart
    eval_s: list[float] = field(default_factory=list)
    # Training time until the target was reached, the first step's computation apart:
    # compilation lands there, cold in a job's first round and from the cache in its later
    # ones (a default run's JAX jit: 5.1 and 1.1 s), which would make seeds of one cell
    # differ by the cache and a compiled recipe pay for it against eager. (The wait for its
    # batch, the pipeline's start, counts, as every later epoch's does.)
    time_to_accuracy_s: float | None = None
    first_compute_s: float = 0.0  # the first step from its batch's arrival: compilation
    # The test images the last epoch's model got wrong (their indices): the accuracy match
    # estimates the trained models' spread from which images the models tell apart.
    wrong_images: list[int] = field(default_factory=list)

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


def train(epochs: int, batches: Callable[[int], Iterator], step: TrainingStep,
          synchronize: Callable[[], None], mean_loss: Callable[[list], float],
          evaluation: Evaluation, steps_per_epoch: int, warmup: int, target_accuracy: float,
          mark: Callable[[str], None], breakdown: bool = True,
          ablation: "Ablation | None" = None) -> Run:
    """Train for `epochs`; `mark` is called when the first timed step starts and when the
    last one (or the last block of the ablation, which is kept the first epoch's batches
    and timed after each epoch's evaluation) ends."""
    clock = time.perf_counter
    run = Run(warmup=max(0, min(warmup, epochs * steps_per_epoch - 2)))
    done, loop_start, trained_s = 0, None, 0.0
    apart = breakdown and step.separable
    for epoch in range(epochs):
        epoch_start, losses, iterator, span = clock(), [], None, None
        while True:
            t0 = clock()
            if iterator is None:  # its start (workers' first batches) is the first wait
                iterator = batches(epoch)
            batch = next(iterator, None)
            if batch is None:
                break
            t1 = clock()
            if done == run.warmup + 1:
                loop_start = t0
                mark("first_timed_iteration_s")
            stamps, loss = [t0, t1], None
            x, y = step.to_device(batch)
            if ablation is not None and epoch == 0:
                ablation.offer(x, y)
            if breakdown:
                synchronize()
                stamps.append(clock())
            loss = run_step(step, x, y, apart, synchronize,
                            lambda stamps=stamps: stamps.append(clock()))
            losses.append(loss)
            stamps.append(clock())
            if done == 0:
                run.first_step_s = stamps[-1] - t0
                run.first_compute_s = stamps[-1] - t1
            elif done > run.warmup:
                names = _part_names(breakdown, apart)
                for name, start, end in zip(names, stamps[:-1], stamps[1:], strict=True):
                    run.parts.setdefault(name, []).append((end - start) * 1e3)
                run.totals_ms.append((stamps[-1] - t0) * 1e3)
                run.loop_s = stamps[-1] - loop_start
                span = (t0 if span is None else span[0], stamps[-1])
            done += 1
        if span:
            run.wall_s += span[1] - span[0]
        run.epoch_s.append(clock() - epoch_start)
        trained_s += run.epoch_s[-1]
        run.train_loss.append(mean_loss(losses))
        eval_start = clock()
        right = evaluation.logits().argmax(axis=1) == evaluation.labels
        accuracy = float(right.mean())
        run.eval_s.append(clock() - eval_start)
        run.wrong_images = np.flatnonzero(~right).tolist()
        run.test_accuracy.append(accuracy)
        if run.time_to_accuracy_s is None and accuracy >= target_accuracy:
            run.time_to_accuracy_s = trained_s - run.first_compute_s
        if ablation is not None:
            ablation.block()
    if ablation is not None and loop_start is not None:
        run.loop_s = clock() - loop_start  # the ablation's blocks are in the loop's window
    mark("timed_loop_end_s")
    return run


def _part_names(breakdown: bool, apart: bool) -> list[str]:
    if not breakdown:
        return ["input_wait", "step", "rest"]
    if apart:
        return ["input_wait", "copy", "forward_backward", "optimizer", "rest"]
    return ["input_wait", "copy", "step", "rest"]


def run_step(step: TrainingStep, x, y, apart: bool, synchronize: Callable[[], None],
             stamp: Callable[[], None] = lambda: None) -> Any:
    """The step's computation as the timed loop runs it: forward + backward, then the
    optimizer step (two programs where `apart`), or the whole step as one. `stamp` is
    called after each synchronized part."""
    if apart:
        loss = step.forward_backward(x, y)
        synchronize()
        stamp()
        step.optimizer_step()
    else:
        loss = step.compute(x, y)
    synchronize()
    stamp()
    return loss


class Ablation:
    """The step's throughput with the input pipeline taken out, timed in `blocks` between
    the epochs (see the module's docstring): `offer` keeps the first `count` batches the
    step was fed, `block` times the program (`apart`: as train's breakdown runs it) fed
    from them in turn, from a snapshot of the step that it restores after."""

    def __init__(self, step: TrainingStep, count: int, batch: int,
                 synchronize: Callable[[], None], warmup: int, min_duration_s: float,
                 min_iterations: int, apart: bool, blocks: int = 1):
        self.step, self.count, self.batch, self.synchronize = step, count, batch, synchronize
        self.warmup, self.apart, self.blocks = warmup, apart, blocks
        self.min_duration_s, self.min_iterations = min_duration_s, min_iterations
        self.ready: list[tuple[Any, Any]] = []
        self.calls = 0  # the batches are fed in turn, going on from block to block
        self.samples_per_block: list[list[float]] = []

    def offer(self, x, y) -> None:
        if len(self.ready) < self.count:
            self.ready.append((x, y))

    def _stopping(self, block: int) -> Stopping:
        """The block's share of the loop's minimum: the blocks together time as much (6
        iterations in 4 blocks: 2, 2, 1, 1)."""
        iterations = self.min_iterations // self.blocks + (block < self.min_iterations
                                                           % self.blocks)
        return Stopping(self.min_duration_s / self.blocks, max(1, iterations))

    def block(self) -> None:
        def call():
            x, y = self.ready[self.calls % len(self.ready)]
            self.calls += 1
            return run_step(self.step, x, y, self.apart, self.synchronize)

        saved = self.step.snapshot()
        self.synchronize()
        first = not self.samples_per_block
        for _ in range(max(1, self.warmup) if first else 0):  # as the loop warmed up
            call()
        stopping = self._stopping(len(self.samples_per_block))
        self.samples_per_block.append(timed_loop(call, self.synchronize, stopping).host)
        self.step.restore(saved)

    def record(self) -> dict:
        samples = [s for block in self.samples_per_block for s in block]
        blocks = len(self.samples_per_block)
        return {"input": f"{len(self.ready)} batches of the cell's pipeline, the first epoch's "
                "as the step received them (decoded, on the device), in turn",
                "batches": len(self.ready), "blocks": blocks,
                "program": "forward_backward, then optimizer_step" if self.apart
                else "step as one",
                **throughput(samples, self.batch, sum(samples) / 1e3),
                "iterations": len(samples), "samples_ms": samples, **summarize(samples)}


def throughput(samples_ms: list[float], batch: int, wall_s: float) -> dict:
    """Samples per second over the wall time of the steps, the median step's rate beside."""
    return {"samples_per_s": len(samples_ms) * batch / wall_s, "wall_s": wall_s,
            "steps": len(samples_ms),
            "median_step_samples_per_s": batch / (float(np.median(samples_ms)) / 1e3),
            "statistic": "steps × batch / wall time of the timed steps"}


def wall_step(samples_ms: list[float], wall_s: float,
              per_process_steps_ms: list[float] | None = None) -> dict:
    """The wall time per step, what the report compares training cells by (steps fed by
    loader workers are bimodal, so their median falls in either cluster), with its 95%
    interval: the t-interval of the mean step, or with several processes (seeds) the wider
    of it and the processes' spread (measure.stats.between_processes), since steps of
    different processes are not independent draws. One step has no interval."""
    steps = len(samples_ms)
    step = wall_s * 1e3 / steps
    if steps < 2:
        return {"wall_step_ms": step}
    half = t95(steps - 1) * float(np.std(samples_ms, ddof=1)) / np.sqrt(steps)
    low, high = max(step - half, 0.0), step + half
    if per_process_steps_ms and len(per_process_steps_ms) > 1:
        apart = between_processes(per_process_steps_ms, step)["median_ci95_ms"]
        low, high = min(low, max(apart[0], 0.0)), max(high, apart[1])
    return {"wall_step_ms": step, "wall_step_ms_ci95": [low, high]}


# Batches the ablation feeds in turn (fewer where an epoch has fewer).
ABLATION_BATCHES = 8
# The efficiency's interval: the ratio of the two mean step times, bootstrapped.
BOOTSTRAP_RESAMPLES = 2000


def efficiency(real_ms: list[float], ceiling_ms: list[float], real_per_s: float,
               ceiling_per_s: float, seeds: list[dict] | None = None) -> dict:
    """The pipeline's efficiency (real throughput over the ablation's), its 95% interval
    (the two runs' steps resampled independently) and whether the ablation is a ceiling:
    a run whose interval lies above 1 says it is not (flagged, with a note). With several
    processes' steps (`seeds`: each process's own efficiency section), the interval spans
    every process's own too: their steps are not draws from one distribution, and two
    seeds' 78.7% (75.6-81.9%) and 84.6% (80.9-88.4%) pooled read 82% (79-84%), an interval
    that held neither."""
    rng = np.random.default_rng(0)
    real, ceiling = np.asarray(real_ms, float), np.asarray(ceiling_ms, float)
    means = [rng.choice(x, (BOOTSTRAP_RESAMPLES, x.size)).mean(axis=1) for x in (real, ceiling)]
    low, high = (float(v) for v in np.percentile(means[1] / means[0], [2.5, 97.5]))
    for own in seeds or []:
        low, high = min(low, own["efficiency_ci95"][0]), max(high, own["efficiency_ci95"][1])
    value = real_per_s / ceiling_per_s
    above = bool(low > 1)
    return {"efficiency": value, "efficiency_ci95": [low, high],
            "not_a_ceiling": above,
            "note": (f"the pipeline ran faster than its ablation (efficiency {value:.0%}, "
                     f"95% interval {low:.0%}–{high:.0%}): the ablation is no ceiling here"
                     if above else None)}
