"""The `dlbench run` options of one measuring job of the workflow (common.smk's params):
what names its cells, then their scenario's settings, then the measurement settings, each
written by dlbench.scenarios.codec. Snakemake compares them with what it recorded, so that a change
measures finished cells again: the order and form are those the cells were measured with.
"""

from dlbench.plan import settings
from dlbench.plan.matrix import Cell


def job_args(cells: list[Cell], grouped: bool, config: dict) -> list[str]:
    """The options of one job of a validated config: its cell's names and sizes (a
    group's: each size option lists its values; side by side, the other recipes after
    `--beside`), its scenario's settings, then the measurement settings."""
    first = cells[0]
    recipes = list(dict.fromkeys((cell.framework, cell.optimization) for cell in cells))
    own = [cell for cell in cells if (cell.framework, cell.optimization) == recipes[0]]
    names = first.group_cli_args(own) if grouped else first.cli_args()
    if len(recipes) > 1:  # side by side: the other recipes' groups of the same sizes
        names += ["--beside", *(f"{framework}:{optimization}"
                                for framework, optimization in recipes[1:])]
    return (names + first.spec.setting_args(config[first.scenario], first)
            + settings.to_args(config["measurement"]))
