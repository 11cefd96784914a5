"""A failed run keeps the previous run's summary and report (dlbench.run.keep), as the
workflow's onstart, onerror and onsuccess call it; the workflow's own full disk is in
tests/test_disk_full.py."""

import os

from dlbench.run import keep


def made(path, text):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_a_file_the_failed_run_left_missing_is_the_previous_one(tmp_path):
    report, summary = made(tmp_path / "report.html", "old report"), tmp_path / "summary.csv"
    made(summary, "old summary")
    made_at = report.stat().st_mtime
    keep.keep([report, summary])
    report.unlink()  # as Snakemake does before the report job
    summary.unlink()
    made(summary, "new summary")  # the aggregate job succeeded, the report's failed

    assert keep.put_back([report, summary]) == [report]
    assert report.read_text() == "old report"
    assert report.stat().st_mtime == made_at  # older than its new input: made again
    assert summary.read_text() == "new summary"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.html", "summary.csv"]


def test_a_run_that_completed_drops_what_it_kept_and_nothing_is_put_back(tmp_path):
    report = made(tmp_path / "report.html", "old")
    keep.keep([report])
    assert keep.kept_copy(report).stat().st_ino == report.stat().st_ino  # a link, no copy
    report.unlink()
    made(report, "new")
    keep.drop([report])
    assert not keep.kept_copy(report).exists()
    assert keep.put_back([report]) == []
    assert report.read_text() == "new"


def test_nothing_to_keep_on_a_first_run_and_a_dead_runs_link_is_replaced(tmp_path):
    report = tmp_path / "report.html"
    keep.keep([report])
    assert not keep.kept_copy(report).exists()
    made(keep.kept_copy(report), "left by a run that was killed")
    made(report, "current")
    keep.keep([report])
    assert keep.kept_copy(report).read_text() == "current"
    os.unlink(report)
    assert keep.put_back([report]) == [report]
    assert report.read_text() == "current"
