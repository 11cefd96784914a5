"""A result set to compare with another: a results folder — its runs/*.json, which keep
every cell's per-iteration samples — or a summary file (.parquet or .csv), which holds only
each cell's median and its interval; a summary whose cells' result files are all still
where it says (its `source` column, relative to the folder above results/) is read from
them, samples included: exactly the summary's cells, as the workflow aggregated them."""

from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from dlbench.analysis.status import from_elsewhere
from dlbench.analysis.summary import derive
from dlbench.files import paths
from dlbench.records import aggregate, origin, result

SUMMARY_SUFFIXES = (".parquet", ".csv")


class ResultSetError(ValueError):
    """A path that holds no result set; the message names it and what was expected."""


@dataclass
class ResultSet:
    """summary: one row per cell (as `dlbench.analysis.summary.derive` returns it).
    samples: per cell id, the per-iteration samples (ms) of its timed loop; processes: per
    cell id measured in several processes (repeats), the median of each; process_walls:
    for those of them that recorded it (training), each process's wall time per step. All
    are empty for a summary file. elsewhere: its cells from another machine or dlbench
    version (analysis.status.from_elsewhere); those it does not compare are not in
    `summary`."""

    name: str
    summary: pd.DataFrame
    samples: dict[str, list[float]] = field(default_factory=dict)
    processes: dict[str, list[float]] = field(default_factory=dict)
    process_walls: dict[str, list[float]] = field(default_factory=dict)
    elsewhere: pd.DataFrame = field(default_factory=pd.DataFrame)


def load(path: str | Path) -> ResultSet:
    """The result set at `path`: a folder with runs/*.json (or a folder of result JSONs),
    or a summary file; ResultSetError or result.ResultError otherwise."""
    path = Path(path)
    if not path.exists():
        raise ResultSetError(f"{path}: no such folder or file; give a results folder "
                             "(with runs/*.json) or a summary (.parquet or .csv)")
    if path.is_dir():
        return _folder(path)
    if path.suffix not in SUMMARY_SUFFIXES:
        raise ResultSetError(f"{path}: not a summary (.parquet or .csv) nor a results folder")
    summary = pd.read_parquet(path) if path.suffix == ".parquet" else pd.read_csv(path)
    if summary.empty or "cell_id" not in summary:
        raise ResultSetError(f"{path}: a summary without cells")
    sources = [_source(path, s) for s in summary.get("source", [])]
    if sources and all(file.is_file() for file in sources):
        # As the workflow aggregated them: its cells from elsewhere compared or not.
        mixed = origin.FOREIGN in summary and summary[origin.FOREIGN].notna().any() \
            and not summary[origin.LEFT_OUT].astype(bool).any()
        return _records(path, sources, mixed)
    return ResultSet(str(path), derive(summary), elsewhere=from_elsewhere(summary))


def _source(summary: Path, source) -> Path:
    """A result file named in a summary: aggregation ran where results/ lies, as the
    workflow does (results/summary.parquet, results/runs/<cell>.json)."""
    return Path(source) if Path(str(source)).is_absolute() else summary.parent.parent / source


def _folder(path: Path) -> ResultSet:
    runs = path / paths.RUNS_NAME if (path / paths.RUNS_NAME).is_dir() else path
    files = sorted(runs.glob("*.json"))
    if not files:
        raise ResultSetError(f"{path}: no results in it (expected {runs}/*.json, the files "
                             "that `snakemake` writes under results/runs/)")
    return _records(path, files)


def _records(path: Path, files: list[Path], mix_foreign: bool = False) -> ResultSet:
    """The result set of these result files: their summary rows and samples."""
    rows, samples, processes, walls = [], {}, {}, {}
    for file in files:
        record = result.read(file)
        rows.append(aggregate.to_row(record, file))
        timing = record.get("timing") or {}
        if timing.get("samples_ms"):
            samples[record["cell_id"]] = list(timing["samples_ms"])
        repeats = timing.get("repeats") or []
        if len(repeats) > 1:
            processes[record["cell_id"]] = [r["median_ms"] for r in repeats]
            if all("wall_step_ms" in r for r in repeats):
                walls[record["cell_id"]] = [r["wall_step_ms"] for r in repeats]
    summary = aggregate.table(rows, mix_foreign)
    return ResultSet(str(path), derive(summary), samples, processes, walls,
                     from_elsewhere(summary))
