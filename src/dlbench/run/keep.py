"""A failed run keeps the previous run's summary and report.

Snakemake deletes a job's old outputs before it runs the job, and what the job wrote after
it failed. A run whose aggregate or report job fails (the disk full while the report is
written, a notebook that crashes) would therefore leave no summary or report at all, where
the previous run's were whole. So the workflow's onstart links each of them to a hidden name
beside it (a hard link: no copy, no space), onerror puts back any that the run left
missing, and onsuccess drops the links.
"""

import os
import sys
from collections.abc import Iterable
from pathlib import Path

from dlbench.files import paths

# What a run makes once for the whole matrix (the aggregate, report and compare rules).
KEPT = (paths.SUMMARY_PARQUET, paths.SUMMARY_CSV, paths.PROVENANCE, paths.REPORT,
        paths.COMPARE_HTML, paths.COMPARE_CSV)


def kept_copy(path: Path) -> Path:
    return path.with_name(f".{path.name}.previous")


def keep(files: Iterable[str | Path] = KEPT) -> None:
    """Before the run: a link to each file there is (one left by a run that died goes)."""
    for path in map(Path, files):
        copy = kept_copy(path)
        copy.unlink(missing_ok=True)
        if path.exists():
            try:
                os.link(path, copy)
            except OSError:  # a filesystem without hard links: this one is not kept
                pass


def put_back(files: Iterable[str | Path] = KEPT) -> list[Path]:
    """After a failed run: each file the run left missing is the previous run's again,
    with its own date, older than the new results it was not made from, so that the next
    run makes it again (the workflow also drops what Snakemake recorded of the failed job
    that was to make it). Returns the files put back."""
    put = []
    for path in map(Path, files):
        copy = kept_copy(path)
        if not copy.exists():
            continue
        if path.exists():  # the run made a new one (or recovery did): the old link goes
            copy.unlink()
            continue
        os.replace(copy, path)
        put.append(path)
        print(f"dlbench: this run could not make {path}; the previous run's is back in its "
              "place until a run completes", file=sys.stderr)
    return put


def drop(files: Iterable[str | Path] = KEPT) -> None:
    """After a run that completed: the links go (the files they kept are freed)."""
    for path in map(Path, files):
        kept_copy(path).unlink(missing_ok=True)
