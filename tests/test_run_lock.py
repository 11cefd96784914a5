"""One run at a time on a results folder (dlbench.run.runlock): a second run is refused with a
message naming the first, whichever way it reaches the folder, and the first loses nothing."""

import os
import subprocess
import sys
import time

import pandas as pd
import pytest
import yaml

from dlbench.files import paths
from dlbench.run import runlock
from tests.conftest import BIN, REPO, snakemake, start_from, tool_env
from tests.test_faults import PROFILE, SMALL


def test_a_held_lock_refuses_with_its_holder_and_is_free_once_released(tmp_path):
    lock_file = tmp_path / "results" / ".run.lock"
    held = runlock.acquire(lock_file)
    with pytest.raises(runlock.ResultsFolderBusy, match=f"process {os.getpid()} on "):
        runlock.acquire(lock_file)  # flock: a second open file conflicts, even in-process
    runlock.release(held)
    runlock.release(runlock.acquire(lock_file))


def test_the_lock_of_a_killed_run_does_not_block_the_next(tmp_path):
    lock_file = tmp_path / ".run.lock"
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys, time; from pathlib import Path; "
         "from dlbench.run import runlock; held = runlock.acquire(Path(sys.argv[1])); "
         "print(flush=True); time.sleep(600)", str(lock_file)],
        stdout=subprocess.PIPE, env=tool_env())
    holder.stdout.readline()  # it holds the lock
    with pytest.raises(runlock.ResultsFolderBusy, match=f"process {holder.pid} "):
        runlock.acquire(lock_file)
    holder.kill()  # as kill -9: no handler runs, the file keeps its details
    holder.wait()
    assert str(holder.pid) in lock_file.read_text()
    handle = runlock.acquire(lock_file)  # the kernel released the dead run's flock
    assert f'"pid": {os.getpid()}' in lock_file.read_text()
    runlock.release(handle)


@pytest.mark.slow
def test_a_second_run_on_the_same_results_folder_is_refused(tmp_path, measured_once):
    first_dir, second_dir = tmp_path / "first", tmp_path / "second"
    (first_dir / "results").mkdir(parents=True)
    start_from(measured_once, first_dir)
    second_dir.mkdir()
    # Another working directory whose results/ is the first's: Snakemake's lock, kept in
    # each working directory, does not see it (without dlbench's lock, the second run
    # measured the first's cells again, deleting their files under it).
    (second_dir / "results").symlink_to(first_dir / "results")
    # One timed cell (and an unsupported one) that holds, without using the CPU, until the
    # four refused runs below are done, whose Snakemake each takes seconds to start on 2
    # busy cores (a timed cell of 40 s did this, at 40 s of CPU).
    slow = {**SMALL, "frameworks": ["pytorch"],
            "measurement": {**SMALL["measurement"], "timeout_s": 300}}
    release = tmp_path / "release"
    (first_dir / "config.yaml").write_text(yaml.safe_dump(slow))
    first = subprocess.Popen(
        [str(BIN / "snakemake"), "--snakefile", str(REPO / "Snakefile"), "--directory",
         str(first_dir), "--configfile", str(first_dir / "config.yaml"), *PROFILE,
         "--cores", "2"],
        env=tool_env(DLBENCH_TEST_FAULT="hold", DLBENCH_TEST_RELEASE=str(release)),
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lock_file = first_dir / paths.RUN_LOCK
    deadline = time.monotonic() + 120
    while not (lock_file.exists() and lock_file.read_text()) and time.monotonic() < deadline:
        time.sleep(0.5)
    try:
        holder = f"in use by another run (process {first.pid} on "

        # The same working directory: Snakemake's own lock refuses first; its message
        # advises --unlock if no other run is going, and after it dlbench's lock refuses.
        same = snakemake(first_dir, slow, *PROFILE, "--cores", "2")
        assert same.returncode != 0 and "Directory cannot be locked" in same.stderr
        assert snakemake(first_dir, slow, "--unlock").returncode == 0
        unlocked = snakemake(first_dir, slow, *PROFILE, "--cores", "2")
        assert unlocked.returncode != 0 and holder in unlocked.stderr, unlocked.stderr[-2000:]

        other = snakemake(second_dir, slow, *PROFILE, "--cores", "2")
        assert other.returncode != 0, other.stderr[-2000:]
        assert f"the results folder {first_dir / 'results'} is {holder}" in other.stderr
        assert first.poll() is None  # the refusals came while the first run was busy
    finally:
        release.touch()
        output, _ = first.communicate(timeout=600)

    assert first.returncode == 0, output[-3000:]  # the first run lost nothing
    summary = pd.read_parquet(first_dir / paths.SUMMARY_PARQUET)
    assert sorted(summary["status"]) == ["ok", "unsupported"]
    assert (first_dir / paths.REPORT).exists()
    assert not list((first_dir / "results").rglob("*.tmp"))
    assert not list((second_dir / ".snakemake" / "metadata").iterdir())  # it ran no job
    runlock.release(runlock.acquire(lock_file))  # free again once the first run ended
