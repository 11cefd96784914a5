"""A cell of the matrix: (scenario, framework, model, device, optimization, sizes), its id,
its paths and its `dlbench run` options (dlbench.plan.matrix expands a config into cells). It
finds its scenario through the registry, without importing the scenarios."""

from dataclasses import dataclass
from typing import Any

from dlbench.catalogue import frameworks
from dlbench.catalogue.axes import other_scenario_reason
from dlbench.files import paths
from dlbench.scenarios.registry import get

# The scenario a command line means when it names none (v1's only one).
DEFAULT_SCENARIO = "inference"


@dataclass(frozen=True)
class Cell:
    scenario: str
    framework: str
    model: str
    device: str
    optimization: str
    sizes: tuple[tuple[str, int | str], ...] = ()

    @property
    def spec(self) -> Any:
        """Its scenario (a dlbench.scenarios.Scenario)."""
        return get(self.scenario)

    def size(self, axis: str) -> int | str:
        return dict(self.sizes)[axis]

    @property
    def head(self) -> str:
        return self.spec.id_head(self)

    @property
    def tail(self) -> str:
        return self.spec.id_tail(self)

    @property
    def middle(self) -> str:
        """The sizes as they read in the id: b1_s16."""
        axes = {axis.name: axis for axis in self.spec.axes}
        return "_".join(f"{axes[name].id_prefix}{value}" for name, value in self.sizes)

    @property
    def id(self) -> str:
        return "_".join(part for part in (self.head, self.middle, self.tail) if part)

    @property
    def group_id(self) -> str:
        """The cells that one process may measure together (measurement.process)."""
        return f"{self.head}_{self.tail}"

    @property
    def side_by_side_id(self) -> str:
        """The cells of every recipe that one job measures side by side (measurement.process:
        side_by_side): those of a scenario, model and device."""
        return f"{self.spec.name}_{self.model}_{self.device}"

    def grouped(self, process: str) -> bool:
        """Whether this cell is measured with its group (measurement.process: per_group,
        or side_by_side off the CPU; where its scenario allows it)."""
        return self.spec.groupable and (
            process == "per_group" or (process == "side_by_side" and self.device != "cpu"))

    def side_by_side(self, process: str) -> bool:
        """Whether this cell's group is measured side by side with the other recipes'
        (measurement.process: side_by_side, where its scenario groups sizes; on the CPU,
        the device whose work taking turns keeps apart: a GPU's cells are grouped)."""
        return process == "side_by_side" and self.spec.groupable and self.device == "cpu"

    def unit(self, process: str) -> str:
        """What the job that measures this cell measures: its side-by-side unit, its group,
        or itself."""
        if self.side_by_side(process):
            return self.side_by_side_id
        return self.group_id if self.grouped(process) else self.id

    def log_path(self, process: str) -> str:
        """The log of the job that measures this cell."""
        if self.grouped(process) or self.side_by_side(process):
            return paths.group_log(self.unit(process))
        return paths.cell_log(self.id)

    @property
    def result_path(self) -> str:
        return paths.result(self.id)

    @property
    def failed_path(self) -> str:
        return paths.failed(self.id)

    def params(self) -> dict:
        return {"scenario": self.scenario, "framework": self.framework, "model": self.model,
                "device": self.device, **dict(self.sizes), "optimization": self.optimization}

    @classmethod
    def from_params(cls, params: dict) -> "Cell":
        axes = [axis.name for axis in get(params["scenario"]).axes]
        return cls(params["scenario"], params["framework"], params["model"], params["device"],
                   params["optimization"], tuple((name, params[name]) for name in axes))

    def unsupported_reason(self) -> str | None:
        """Why this cell cannot apply, known without running it (None if it can): first,
        a framework that does not measure the scenario at all."""
        declared = frameworks.get(self.framework)
        if not declared.measures(self.scenario):
            return other_scenario_reason(self.scenario, self.framework, declared.scenarios)
        return self.spec.unsupported_reason(self)

    def protocol(self) -> int:
        """The revision of how this cell is measured (1: as dlbench v1 measured it)."""
        return self.spec.protocol(self)

    def _protocol_args(self) -> list[str]:
        """`--protocol=N` where the cell's protocol changed since v1: its command line
        changes with it, so that the workflow measures it again instead of reusing an
        older result. (Unchanged cells keep their v1 command lines, and their results.)"""
        protocol = self.protocol()
        return [f"--protocol={protocol}"] if protocol > 1 else []

    def cli_args(self) -> list[str]:
        """The `dlbench run` options naming this cell (the scenario only where it is not
        the default, so that inference cells keep their v1 command lines)."""
        scenario = [] if self.scenario == DEFAULT_SCENARIO else [f"--scenario={self.scenario}"]
        return [*scenario, f"--framework={self.framework}", f"--model={self.model}",
                f"--device={self.device}", *self.spec.axes_codec().to_args(dict(self.sizes)),
                f"--optimization={self.optimization}", *self._protocol_args()]

    def group_cli_args(self, cells: list["Cell"]) -> list[str]:
        """The `dlbench run` options naming a group of cells: each axis lists its values."""
        scenario = [] if self.scenario == DEFAULT_SCENARIO else [f"--scenario={self.scenario}"]
        args = [*scenario, f"--framework={self.framework}", f"--model={self.model}",
                f"--device={self.device}", f"--optimization={self.optimization}"]
        sizes = {name: list(dict.fromkeys(cell.size(name) for cell in cells))
                 for name, _ in self.sizes}
        return args + self.spec.axes_codec().to_args(sizes) + self._protocol_args()
