"""The matrix: config → cells with stable, readable ids, each knowing its own paths.

A cell is (scenario, framework, model, device, optimization, sizes): the sizes are the
scenario's own axes (inference: batch and sequence length). Its id reads
`<head>_<sizes>_<tail>`, e.g. `pytorch_bert-base-uncased_cpu_b1_s16_eager`; the cells that
differ only in their sizes share head and tail, and form a group (measurement.process).

A cell that cannot apply is still a cell: it is recorded as `unsupported` with the reason
(without importing any framework), so that nothing silently disappears from the report.
"""

from dlbench import scenarios
from dlbench.files import paths
from dlbench.scenarios.cell import DEFAULT_SCENARIO, Cell

__all__ = ["DEFAULT_SCENARIO", "Cell", "expand_cells", "group_outputs", "side_by_side_outputs"]


def expand_cells(config: dict) -> list[Cell]:
    """Every cell of a validated config: each scenario's section, in config order."""
    cells = []
    for name in config["scenarios"]:
        cells += scenarios.get(name).cells(config[name], config["frameworks"], config["devices"])
    return cells


def group_outputs(cells: list[Cell]) -> tuple[list[str], list[str], list[str]]:
    """The output patterns of the group rule, and the heads and tails of its groups.

    A group's cells are `<head>_<middle>_<tail>`: the rule's wildcards are head and tail,
    one output per middle (the sizes). Every group of one rule has the same sizes.
    """
    groups: dict[str, list[Cell]] = {}
    for cell in cells:
        groups.setdefault(cell.group_id, []).append(cell)
    middles = {tuple(cell.middle for cell in group) for group in groups.values()}
    if len(middles) > 1:
        raise ValueError("the grouped cells of this matrix have different sizes per group; "
                         "measure them with measurement.process: per_cell")
    patterns = [paths.result(f"{{head}}_{middle}_{{tail}}") for middle in next(iter(middles), ())]
    heads = sorted({cell.head for cell in cells})
    tails = sorted({cell.tail for cell in cells})
    return patterns, heads, tails


def side_by_side_outputs(units: dict[str, list[Cell]]) -> list[str]:
    """The output patterns of the side-by-side rule (measurement.process: side_by_side):
    each unit's cells (every recipe's, every size) with its model and device as the rule's
    wildcards. Every unit of one rule has the same recipes and sizes."""
    shapes = {tuple(Cell(cell.scenario, cell.framework, "{model}", "{device}",
                         cell.optimization, cell.sizes).id for cell in cells)
              for cells in units.values()}
    if len(shapes) > 1:
        raise ValueError("the models of this matrix have different recipes or sizes; "
                         "measure them side by side only where they are the same, or with "
                         "measurement.process: per_group")
    return [paths.result(cell_id) for cell_id in next(iter(shapes), ())]
