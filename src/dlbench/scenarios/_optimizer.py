"""What the training scenarios share about their optimizer: the axis (sgd, adam; see
dlbench.catalogue.optimizers.OPTIMIZERS) and its setting, the learning rate of each optimizer
(config: `<section>.learning_rate.<optimizer>`; `dlbench run --learning-rate`).

Not a scenario: a scenario with an optimizer axis inherits `OptimizerSettings` before
`Scenario` and extends its settings with its own.
"""

from dlbench.catalogue.optimizers import OPTIMIZERS
from dlbench.scenarios import Axis

# One definition, so that every scenario's `--optimizer` option reads the same values.
OPTIMIZER_AXIS = Axis("optimizer", "optimizers", "", "optimizers", str,
                      choices=tuple(OPTIMIZERS))


class OptimizerSettings:
    """The learning-rate setting of a scenario with the optimizer axis."""

    def settings_schema(self) -> dict:
        # One rate per optimizer in the config; a cell's command line carries its own.
        return {"learning_rate": {
            "description": "learning rate of each optimizer", "type": "object",
            "x-per-axis": OPTIMIZER_AXIS.name,
            "additionalProperties": False, "default": {},
            "properties": {name: {"type": "number", "exclusiveMinimum": 0,
                                  "default": o.learning_rate}
                           for name, o in OPTIMIZERS.items()}}}
