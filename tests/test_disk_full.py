"""No space left on the device while a result, the summary or the report is written, on a
real small filesystem (a tmpfs mounted for the test): the previous file stays whole, the
error names the file, and once space is freed the next write completes."""

import contextlib
import errno
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest

from dlbench.files import atomic, paths
from dlbench.plan import config
from dlbench.plan.matrix import expand_cells
from dlbench.records import result
from tests.conftest import REPO, snakemake, start_from, tiny_config, tool_env
from tests.test_faults import CELL, PROFILE

# One cell: the workflow's writes are under test, not the matrix.
ONE_CELL = tiny_config(frameworks=["pytorch"], models=["tiny-bert"], devices=["cpu"],
                       batch_sizes=[1], sequence_lengths=[8], optimizations=["eager"])
ONE_CELL_RESULT = next(c.result_path for c in expand_cells(config.validate(ONE_CELL)))
V1_RUNS = sorted((REPO / "tests" / "data" / "v1_results" / "per_cell" / "runs").glob("*.json"))


@contextlib.contextmanager
def tmpfs(folder: Path, size: str) -> Iterator[Path]:
    """A tmpfs of `size` mounted on `folder`: a real filesystem that fills up. Mounting
    needs root (or CAP_SYS_ADMIN), which the test containers give; elsewhere the tests
    are skipped."""
    folder.mkdir(parents=True, exist_ok=True)
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs",
                              str(folder)], capture_output=True, text=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here: {mounted.stderr.strip()}")
    try:
        yield folder
    finally:
        subprocess.run(["umount", str(folder)], check=True)


@pytest.fixture
def small_disk(tmp_path) -> Iterator[Path]:
    with tmpfs(tmp_path / "disk", "4m") as disk:
        yield disk


def fill(disk: Path) -> Path:
    """Fill the filesystem to its last byte; the file that holds the space."""
    filler = disk / "filler"
    with open(filler, "wb", buffering=0) as f:
        try:
            while True:
                f.write(b"\0" * 65536)
        except OSError as error:
            assert error.errno == errno.ENOSPC
    return filler


def dlbench(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "dlbench", *args], capture_output=True,
                          text=True, timeout=300, env=tool_env())


def full_disk_message(path: Path) -> str:
    return f"no space left on device while writing {path}: it was not written"


def aggregate(results: list[Path], summary: Path) -> subprocess.CompletedProcess:
    return dlbench("aggregate", *map(str, results), "--parquet", str(summary),
                   "--csv", str(summary.with_suffix(".csv")))


def test_a_full_disk_keeps_the_previous_summary_and_says_so(small_disk):
    summary, csv = small_disk / "summary.parquet", small_disk / "summary.csv"
    assert aggregate(V1_RUNS[:1], summary).returncode == 0
    before = summary.read_bytes(), csv.read_bytes()

    filler = fill(small_disk)
    full = aggregate(V1_RUNS, summary)
    assert full.returncode == 1
    assert f"dlbench aggregate: {full_disk_message(summary)}" in full.stderr
    assert "Traceback" not in full.stderr
    assert (summary.read_bytes(), csv.read_bytes()) == before
    assert not list(small_disk.glob(".*.tmp"))  # the temporary's space was given back

    filler.unlink()
    assert aggregate(V1_RUNS, summary).returncode == 0
    assert len(pd.read_parquet(summary)) == len(V1_RUNS) == len(pd.read_csv(csv))


def test_writing_names_the_file_for_each_kind_of_full_disk(tmp_path):
    for code in atomic.DISK_FULL_ERRNOS:  # the device, a quota, a file size limit
        target = tmp_path / "summary.csv"
        with pytest.raises(atomic.DiskFull, match=f"while writing {target}: it was not"):
            with atomic.replacing(target):
                raise OSError(code, "as the operating system says it")
    with pytest.raises(PermissionError):  # any other error stays what it was
        with atomic.replacing(tmp_path / "x"):
            raise PermissionError(errno.EACCES, "denied")
    assert not list(tmp_path.iterdir())


@pytest.mark.slow
def test_a_full_disk_keeps_the_previous_result_and_report_and_the_next_run_completes(
        small_disk, tmp_path):
    out, failed = small_disk / "runs" / "cell.json", small_disk / "failed" / "cell.json"
    run = ["run", *CELL, f"--out={out}", f"--failed-out={failed}"]
    assert dlbench(*run).returncode == 0
    summary, html = tmp_path / "summary.parquet", small_disk / "report.html"
    assert aggregate([out], summary).returncode == 0
    report = ["report", "--notebook", str(REPO / "workflow" / "notebooks" / "report.py"),
              "--summary", str(summary), "--executed", str(tmp_path / "report.ipynb"),
              "--out", str(html)]
    assert dlbench(*report).returncode == 0
    before = out.read_bytes(), html.read_bytes()

    filler = fill(small_disk)
    full = dlbench(*run)
    assert full.returncode != 0
    assert full_disk_message(out) in full.stderr, full.stderr[-3000:]
    assert "Traceback" not in full.stderr
    full = dlbench(*report)
    assert full.returncode == 1
    assert f"dlbench report: {full_disk_message(html)}" in full.stderr, full.stderr[-3000:]
    assert (out.read_bytes(), html.read_bytes()) == before
    assert not failed.exists() and not list(small_disk.rglob(".*.tmp"))

    filler.unlink()
    assert dlbench(*run).returncode == 0
    rerun = result.read(out)
    assert rerun["status"] == "ok"
    assert rerun["started_at"] != json.loads(before[0])["started_at"]


@pytest.mark.slow
def test_a_full_disk_in_the_workflow_keeps_the_previous_report_and_the_next_run_completes(
        tmp_path, measured_once):
    # report/ on a tmpfs with room for a report (about 600 KB) and its temporary; once it
    # is full, only the report's write finds the disk full, wherever the cells' timing puts it.
    workdir = start_from(measured_once, tmp_path / "work")
    report, summary = workdir / paths.REPORT, workdir / paths.SUMMARY_PARQUET
    with tmpfs(workdir / "report", "2m") as report_dir:
        first = snakemake(workdir, ONE_CELL, *PROFILE, "--cores", "2")
        assert first.returncode == 0, first.stderr[-3000:]
        before = report.read_bytes()
        filler = fill(report_dir)
        (workdir / ONE_CELL_RESULT).unlink()  # a new result, then a new summary and report
        full = snakemake(workdir, ONE_CELL, *PROFILE, "--cores", "2")
        assert full.returncode != 0
        assert "rule measure_cell" in full.stderr  # a deleted result is measured again
        # The failed job's log, printed by the profile's show-failed-logs.
        assert f"dlbench report: {full_disk_message(Path(paths.REPORT))}" in full.stderr, \
            full.stderr[-3000:]
        assert f"could not make {paths.REPORT}; the previous run's is back" in full.stderr
        assert report.read_bytes() == before  # Snakemake had deleted it before the job
        assert sorted(p.name for p in report_dir.iterdir()) == ["filler", "report.html"]
        assert list(pd.read_parquet(summary)["status"]) == ["ok"]

        filler.unlink()
        second = snakemake(workdir, ONE_CELL, *PROFILE, "--cores", "2")
        assert second.returncode == 0, second.stderr[-3000:]
        # The report put back is older than the new result's summary: only it is made again.
        assert "rule report" in second.stderr
        assert "rule measure_cell" not in second.stderr
        assert "rule aggregate" not in second.stderr
        assert report.stat().st_mtime > summary.stat().st_mtime
