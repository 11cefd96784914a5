"""The matrix: config axes → cells with stable, readable ids, and which of them can apply.

A cell that cannot apply is still a cell: it is recorded as `unsupported` with the reason
(without importing any framework), so that nothing silently disappears from the report.
"""

import itertools
from dataclasses import asdict, dataclass

from dlbench.axes import FRAMEWORK_LABELS
from dlbench.models import get_model
from dlbench.optimizations import OPTIMIZATIONS

# The transformers line whose model classes the registry names.
TRANSFORMERS_LINE = "4.57"


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

    @property
    def group_id(self) -> str:
        """The cells that one process may measure together (measurement.process)."""
        return f"{self.framework}_{self.model}_{self.device}_{self.optimization}"

    def params(self) -> dict:
        return asdict(self)

    def unsupported_reason(self) -> str | None:
        """Why this cell cannot apply, known without running it (None if it can)."""
        optimization = OPTIMIZATIONS[self.optimization]
        reason = optimization.unsupported_reason(self.framework, self.device)
        if reason:
            return reason
        spec = get_model(self.model)
        if spec.classes.class_name(self.framework) is None:
            return (
                f"transformers {TRANSFORMERS_LINE} has no {FRAMEWORK_LABELS[self.framework]} "
                f"class for {self.model} ({spec.family})"
            )
        no_mixed = spec.classes.tensorflow_no_mixed_precision
        if self.framework == "tensorflow" and optimization.precision.name != "fp32" and no_mixed:
            return f"optimization '{self.optimization}' on {self.model}: {no_mixed}"
        if spec.max_positions is not None and self.seqlen > spec.max_positions:
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
