"""What the training scenarios share about their optimizer: the axis (sgd, adam; see
dlbench.catalogue.optimizers.OPTIMIZERS) and its setting, the learning rate of each optimizer
(config: `<section>.learning_rate.<optimizer>`; `dlbench run --learning-rate`).

Not a scenario: a scenario with an optimizer axis inherits `OptimizerSettings` before
`Scenario` and extends its settings with its own.
"""

import argparse
from typing import TYPE_CHECKING

from dlbench.catalogue.optimizers import OPTIMIZERS
from dlbench.scenarios import Axis

if TYPE_CHECKING:
    from dlbench.matrix import Cell

# One definition, so that every scenario's `--optimizer` option reads the same values.
OPTIMIZER_AXIS = Axis("optimizer", "optimizers", "", "optimizers", str,
                      choices=tuple(OPTIMIZERS))


class OptimizerSettings:
    """The learning-rate setting of a scenario with the optimizer axis."""

    name: str

    def settings_schema(self) -> dict:
        return {"learning_rate": {
            "description": "learning rate of each optimizer", "type": "object",
            "additionalProperties": False, "default": {},
            "properties": {name: {"type": "number", "exclusiveMinimum": 0,
                                  "default": o.learning_rate}
                           for name, o in OPTIMIZERS.items()}}}

    def setting_args(self, section: dict, cell: "Cell") -> list[str]:
        name = cell.size("optimizer")
        rate = section["learning_rate"].get(name, OPTIMIZERS[name].learning_rate)
        return [f"--learning-rate={rate}"]

    def add_setting_options(self, parser: argparse.ArgumentParser) -> None:
        try:
            parser.add_argument("--learning-rate", type=float,
                                help="training scenarios: the optimizer's learning rate "
                                "(default: the optimizer's own)")
        except argparse.ArgumentError:  # another scenario with an optimizer added it
            pass

    def settings_from_args(self, args: argparse.Namespace) -> dict:
        if args.scenario != self.name:
            return {}
        optimizer = (args.optimizer or ["sgd"])[0]
        return {"learning_rate": args.learning_rate or OPTIMIZERS[optimizer].learning_rate}
