"""A step made of parts (a training step: forward, loss and backward; then the optimizer
step), each part followed by the device's synchronization and timed on its own, inside the
timing of the whole step (dlbench.measure.timing.steady_state).

What the first part returns (the loss, a device tensor) is kept for every call and read
after the loop, so that nothing waits for the device inside it beyond the synchronization.
"""

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from dlbench.measure.stats import summarize


@dataclass
class StepParts:
    """What a framework's operations give a scenario to time: the parts in order (the first
    returns the loss), and how the step was cut into them, in words. A step that cannot be
    cut (compiled as a whole) is one part."""

    parts: dict[str, Callable[[], object]]
    how: str

    @property
    def separable(self) -> bool:
        return len(self.parts) > 1


@dataclass
class TimedParts:
    """The step to time: calling it runs every part, each followed by `synchronize`, and
    keeps each part's time (ms) and the first part's return value, call by call."""

    step: StepParts
    synchronize: Callable[[], None]
    samples_ms: dict[str, list[float]] = field(init=False)
    outputs: list = field(default_factory=list, init=False)

    def __post_init__(self):
        self.samples_ms = {name: [] for name in self.step.parts}

    def __call__(self) -> None:
        clock = time.perf_counter
        for position, (name, part) in enumerate(self.step.parts.items()):
            start = clock()
            output = part()
            self.synchronize()
            self.samples_ms[name].append((clock() - start) * 1e3)
            if position == 0:
                self.outputs.append(output)

    def cold_start_s(self) -> dict[str, float]:
        """Each part's share of the first call (compilation lands there), in seconds."""
        return {name: samples[0] / 1e3 for name, samples in self.samples_ms.items()}

    def warmup_s(self, warmup: int) -> float:
        """The seconds the warm-up calls took (after the first): a recompilation that the
        first call's state triggers (torch.compile's guards) lands here."""
        return sum(sum(samples[1:1 + warmup]) for samples in self.samples_ms.values()) / 1e3

    def breakdown(self, skip: int, steps_ms: list[float]) -> dict | None:
        """The parts of the calls after the first `skip` (the first call and the warm-up),
        against the steps' times; None for a step of one part."""
        if not self.step.separable:
            return None
        return breakdown({name: samples[skip:] for name, samples in self.samples_ms.items()},
                         steps_ms)


def breakdown(parts_ms: dict[str, list[float]], steps_ms: list[float]) -> dict:
    """Per part: its samples, their statistics, and its share of the steps' total time (the
    shares add up to 1 where the parts tile the step, as in the training loop; to a little
    less where the step's timing surrounds its parts', as in TimedParts)."""
    total = sum(steps_ms)
    return {name: {"samples_ms": samples, "share": sum(samples) / total if total else 0.0,
                   **summarize(samples)}
            for name, samples in parts_ms.items()}
