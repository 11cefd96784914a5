"""The matrix: config axes → cells with stable, readable ids, and which of them can apply.

A cell that cannot apply is still a cell: it is recorded as `unsupported` with the reason
(without importing any framework), so that nothing silently disappears from the report.
"""

import itertools
from dataclasses import asdict, dataclass

from dlbench.axes import FRAMEWORK_LABELS
from dlbench.models import get_model
from dlbench.optimizations import OPTIMIZATIONS


@dataclass(frozen=True)
class Cell:
    framework: str
    model: str
    device: str
    batch: int
    seqlen: int
    optimization: str

    @property
    def id(self) -> str:
        return (
            f"{self.framework}_{self.model}_{self.device}"
            f"_b{self.batch}_s{self.seqlen}_{self.optimization}"
        )

    def params(self) -> dict:
        return asdict(self)

    def unsupported_reason(self) -> str | None:
        """Why this cell cannot apply, known without running it (None if it can)."""
        optimization = OPTIMIZATIONS[self.optimization]
        if self.framework not in optimization.frameworks:
            others = ", ".join(FRAMEWORK_LABELS[f] for f in sorted(optimization.frameworks))
            return (
                f"optimization '{self.optimization}' does not exist in "
                f"{FRAMEWORK_LABELS[self.framework]} (only in {others})"
            )
        spec = get_model(self.model)
        if self.seqlen > spec.max_positions:
            return (
                f"sequence length {self.seqlen} exceeds {self.model}'s maximum of "
                f"{spec.max_positions} positions"
            )
        return None

    def cli_args(self) -> list[str]:
        return [
            f"--framework={self.framework}",
            f"--model={self.model}",
            f"--device={self.device}",
            f"--batch={self.batch}",
            f"--seqlen={self.seqlen}",
            f"--optimization={self.optimization}",
        ]


def expand_cells(config: dict) -> list[Cell]:
    """Every combination of the config's axes, in config order; ids are unique."""
    return [
        Cell(framework, model, device, batch, seqlen, optimization)
        for framework, model, device, batch, seqlen, optimization in itertools.product(
            config["frameworks"],
            config["models"],
            config["devices"],
            config["batch_sizes"],
            config["sequence_lengths"],
            config["optimizations"],
        )
    ]
