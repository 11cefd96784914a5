"""After a run that failed: the summary and report of everything, failures included.

A crashed or timed-out cell fails its job (so that a re-run retries it) but keeps its
record in results/failed/. Snakemake then never reaches the aggregate and report rules, so
the workflow's `onerror` handler calls this: every cell of the matrix gets a row, from its
result, its failed record, or a record saying that it has no result.
"""

import os
from collections.abc import Iterable
from pathlib import Path

from dlbench.files import paths
from dlbench.plan.matrix import Cell
from dlbench.records import aggregate
from dlbench.records.record import finish, new_record

# What the aggregate and report rules would have written.
OUTPUTS = (paths.SUMMARY_PARQUET, paths.SUMMARY_CSV, paths.REPORT)


def records(cells: Iterable[Cell], settings: dict, runs: Path, failed: Path) -> list[Path]:
    """One record file per cell; writes a failed record for each cell that has none."""
    found = []
    for cell in cells:
        done, kept = runs / Path(cell.result_path).name, failed / Path(cell.failed_path).name
        if not done.exists() and not kept.exists():
            log = cell.log_path(settings.get("process", "per_cell"))
            record = new_record(cell, settings)
            record["status"] = "error"
            record["reason"] = (
                "no result: its job failed without writing one, or the run stopped before it "
                f"(see {log})"
            )
            finish(record, kept)
        found.append(done if done.exists() else kept)
    return found


def summarize_failed_run(cells: Iterable[Cell], settings: dict, notebook: Path,
                         mix_foreign: bool = False) -> None:
    """Summary and report if a cell failed; nothing after a plain interruption (Ctrl-C).
    mix_foreign: compare cells from elsewhere, as the aggregate rule does (report.mix_foreign)."""
    cells = list(cells)
    if not any(Path(cell.failed_path).exists() for cell in cells):
        return
    files = records(cells, settings, Path(paths.RUNS), Path(paths.FAILED))
    summary, csv, html = (Path(p) for p in OUTPUTS)
    aggregate.aggregate(files, summary, csv, mix_foreign)
    try:
        # Imported here: the summary needs only pandas, the report its own packages
        # (envs/report.yaml), which the environment running Snakemake may lack (a GPU or
        # cluster node set up for the frameworks alone).
        from dlbench import report

        # The peaks measured so far (the report matches them to the cells' device,
        # precision and threads).
        report.render(notebook, summary, Path(paths.REPORT_NOTEBOOK), html,
                      paths.peaks_measured())
        shown = f"{paths.REPORT} shows them as errors with the reason"
    except ImportError as error:
        shown = (f"{paths.SUMMARY_CSV} lists them with the reason (no report: {error}; the "
                 "report's packages are in envs/report.yaml"
                 + (f"; {paths.REPORT} is an earlier run's" if html.exists() else "") + ")")
    # Older than every record: they stand in for the aggregate and report rules' outputs
    # until a run completes, so the next run must see them as outdated and rebuild them.
    stamp = min(path.stat().st_mtime for path in files) - 1
    for path in OUTPUTS:
        if Path(path).exists():
            os.utime(path, (stamp, stamp))
    print(f"Some cells failed: {shown}; run the same command again to retry only those "
          "cells.")
