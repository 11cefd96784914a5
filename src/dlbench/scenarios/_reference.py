"""What the transformer scenarios share about their inputs: the workflow's seeded weights
(`results/reference/<model>/model.safetensors`) and a reference file per size beside them,
which `dlbench.reference` makes (inference's outputs, which train_step reads too;
generation's ids). A cell's command names its reference (`--reference`), a group's the
model's folder (`--reference-dir`), where each cell finds its file by `reference_name`.

Not a scenario: a scenario inherits `SharedReference` before `Scenario` and names its
reference files.
"""

from pathlib import Path
from typing import TYPE_CHECKING

from dlbench.files import paths

if TYPE_CHECKING:
    from dlbench.scenarios.cell import Cell


class SharedReference:
    """The shared weights and per-size reference files of a scenario's cells."""

    def reference_name(self, cell: "Cell") -> str:
        """The file name of the cell's reference in its model's folder."""
        raise NotImplementedError

    def inputs(self, cell: "Cell") -> dict[str, str]:
        return {"weights": paths.weights(cell.model),
                "reference": f"{paths.reference_dir(cell.model)}/{self.reference_name(cell)}"}

    def input_args(self, cells: list["Cell"], inputs: dict, group: bool) -> list[str]:
        """The reference of one cell, or the folder of a group's."""
        if "weights" not in inputs.keys():
            return []
        weights = inputs["weights"][0]
        if not group:
            return [f"--weights={weights}", f"--reference={inputs['reference'][0]}"]
        return [f"--weights={weights}", f"--reference-dir={Path(weights).parent}"]

    def add_input_options(self, parser) -> None:
        parser.add_argument("--weights", type=Path,
                            help="shared weights (model.safetensors from dlbench.reference); "
                            "default: random from the seed")
        references = parser.add_mutually_exclusive_group()
        references.add_argument("--reference", type=Path,
                                help="the reference (.npz from dlbench.reference) of one cell")
        references.add_argument("--reference-dir", type=Path,
                                help="the folder of the model's references, one per size")

    def task_inputs(self, args, cell: "Cell") -> dict[str, str | None]:
        reference = args.reference
        if args.reference_dir:
            reference = args.reference_dir / self.reference_name(cell)
        return {"weights": args.weights and str(args.weights),
                "reference": reference and str(reference)}
