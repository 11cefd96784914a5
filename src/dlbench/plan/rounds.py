"""The order of a run's measuring jobs in rounds (measurement.rounds): which jobs measure
what, and which job runs before which.

A *unit* is what one measuring job measures: one cell, a group of cells measured in one
process (measurement.process: per_group), or the groups of every recipe measured side by
side (side_by_side). With rounds, each unit that measures anything
is measured once per round of its scenario (`Scenario.rounds`), and the units of a device
run one after the other in a fixed order, each round in the reverse order of the one
before — A B C, C B A, A B C … —, so that the machine's drift over the run falls on every
framework alike and two cells' rounds can be paired. The order within a round keeps a
scenario's and a model's units together, so that the cells a comparison pairs are
measured minutes apart at most. The workflow makes each job wait for the one before it
(common.smk), whatever else Snakemake could start.
"""

from collections.abc import Iterable

from dlbench.catalogue.frameworks import REGISTERED
from dlbench.scenarios.cell import Cell


def units(cells: Iterable[Cell], process: str) -> dict[str, list[Cell]]:
    """The measuring jobs' cells, by the job's key (`Cell.unit`)."""
    found: dict[str, list[Cell]] = {}
    for cell in cells:
        found.setdefault(cell.unit(process), []).append(cell)
    return found


def measures(cells: list[Cell]) -> bool:
    """Whether a unit measures anything (not only cells that record why they cannot)."""
    return any(cell.unsupported_reason() is None for cell in cells)


def unit_rounds(cells: list[Cell], config: dict) -> int:
    """How many rounds a unit is measured in: its scenario's, or 1 for a unit that only
    records why its cells cannot run."""
    return cells[0].spec.rounds(config) if measures(cells) else 1


def _order(cells: list[Cell], scenarios: list[str]) -> tuple:
    first = cells[0]
    frameworks = list(REGISTERED)
    return (scenarios.index(first.scenario) if first.scenario in scenarios else len(scenarios),
            first.model, first.device,
            frameworks.index(first.framework) if first.framework in frameworks else 0,
            first.optimization, first.id)


def schedule(found: dict[str, list[Cell]], rounds_of: dict[str, int],
             scenarios: list[str]) -> dict[str, list[tuple[str, int]]]:
    """Per device, the (unit key, round) of every job of the units measured in more than
    one round, in the order they run: round by round, each in the reverse order of the one
    before; a unit with fewer rounds than another leaves the later ones."""
    chains: dict[str, list[tuple[str, int]]] = {}
    ordered = sorted((key for key, n in rounds_of.items() if n > 1),
                     key=lambda key: _order(found[key], scenarios))
    for round_ in range(max((rounds_of[key] for key in ordered), default=0)):
        for key in ordered if round_ % 2 == 0 else reversed(ordered):
            if round_ < rounds_of[key]:
                chains.setdefault(found[key][0].device, []).append((key, round_))
    return chains


def previous(chains: dict[str, list[tuple[str, int]]]) -> dict[tuple[str, int], tuple[str, int]]:
    """Each job's predecessor in its device's order (the first has none)."""
    before = {}
    for chain in chains.values():
        before.update(zip(chain[1:], chain[:-1], strict=True))
    return before
