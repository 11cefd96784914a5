"""The warm parent (dlbench.warm): `dlbench run` jobs of a framework are forked from one
process that imported it, each still a fresh process that records where it came from; a
job whose client dies is stopped; the switch and SLURM turn it off."""

import signal
import subprocess
import sys
import time

import psutil
import pytest

from dlbench import warm
from dlbench.records import result
from tests.conftest import tool_env

CELL = ["--framework=pytorch", "--model=tiny-bert", "--device=cpu", "--batch=1", "--seqlen=8",
        "--optimization=eager", "--warmup-iterations=1", "--min-duration-s=0.05",
        "--min-iterations=3"]


def run(out, **env: str) -> subprocess.CompletedProcess:
    env = {"DLBENCH_WARM_PARENT": "1", **env}
    return subprocess.run([sys.executable, "-m", "dlbench", "run", *CELL, f"--out={out}"],
                          capture_output=True, text=True, timeout=300, env=tool_env(**env))


def test_jobs_are_forked_by_one_parent_that_imported_the_framework(tmp_path):
    # A variable of this test's own: a parent of its own, whatever ran before.
    env = {"DLBENCH_TEST_WARM": str(tmp_path), "PYTHONPROFILEIMPORTTIME": "1"}
    first, second = tmp_path / "first.json", tmp_path / "second.json"
    assert run(first, **env).returncode == 0
    done = run(second, **env)
    assert done.returncode == 0, done.stderr[-3000:]
    one, two = (result.read(path) for path in (first, second))
    assert one["status"] == two["status"] == "ok"
    parent = one["process"]["warm_parent"]
    assert two["process"]["warm_parent"] == {**parent, "jobs_before": parent["jobs_before"] + 1}
    assert "--warm-parent" in psutil.Process(parent["pid"]).cmdline()  # waiting for more
    # torch and transformers were imported by the parent (its log), not by the command or
    # its job (their stderr): the job had them from the fork (and imported only what the
    # model needs of them, lazily, as a cold job does after its imports).
    assert {"torch", "transformers"} <= _modules(open(parent["log"]).read())
    assert not {"torch", "transformers", "dlbench.frameworks.pytorch.inference"} \
        & _modules(done.stderr)
    # The job measured as a cold one does: its model built, its loop timed.
    assert two["timing"]["iterations"] >= 3 and not two["process"]["model_reused"]


def test_off_by_default_under_slurm_and_for_frameworks_that_measured_otherwise(tmp_path,
                                                                              monkeypatch):
    out = tmp_path / "cold.json"
    assert run(out, DLBENCH_WARM_PARENT="0").returncode == 0
    assert result.read(out)["process"]["warm_parent"] is None
    monkeypatch.delenv(warm.SWITCH, raising=False)
    assert not warm.enabled("pytorch")  # off by default
    monkeypatch.setenv(warm.SWITCH, "1")
    assert warm.enabled("pytorch")
    monkeypatch.setenv("SLURM_JOB_ID", "7")
    assert not warm.enabled("pytorch")
    monkeypatch.delenv("SLURM_JOB_ID")
    # Measured slower when forked so (bench/warm_parent.py): their jobs import for themselves.
    assert not warm.enabled("tensorflow") and not warm.enabled("jax")
    monkeypatch.setenv(warm.SWITCH, "all")  # as bench/warm_parent.py measures them
    assert warm.enabled("tensorflow") and warm.enabled("jax")


def test_a_parent_serves_only_jobs_of_its_framework_scenario_threads_and_environment(monkeypatch):
    base = warm.identity("pytorch", "inference", 2)
    assert warm.identity("pytorch", "inference", 2) == base
    assert warm.identity("tensorflow", "inference", 2) != base
    assert warm.identity("pytorch", "training", 2) != base
    assert warm.identity("pytorch", "inference", 1) != base
    monkeypatch.setenv("TF_ENABLE_ONEDNN_OPTS", "0")  # read by an import: its own parent
    assert warm.identity("pytorch", "inference", 2) != base
    monkeypatch.undo()
    monkeypatch.setenv("PYTEST_CURRENT_TEST", "another test")  # read by none
    assert warm.identity("pytorch", "inference", 2) == base


@pytest.mark.slow
def test_a_job_whose_command_is_killed_is_stopped(tmp_path):
    """kill -9 of `dlbench run` (the parent's client): its job, a child of the warm parent,
    is stopped (SIGTERM) and keeps the failed record of a stopped job; nothing of it runs."""
    out, failed = tmp_path / "cell.json", tmp_path / "failed.json"
    client = subprocess.Popen(
        [sys.executable, "-m", "dlbench", "run", *CELL, f"--out={out}",
         f"--failed-out={failed}"],
        env=tool_env(DLBENCH_TEST_FAULT="hang", DLBENCH_TEST_WARM=str(tmp_path),
                     DLBENCH_WARM_PARENT="1"),
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while not _job_of(tmp_path) and time.monotonic() < deadline:
        time.sleep(0.2)
    job = _job_of(tmp_path)
    assert job is not None, "no job forked by a warm parent"
    time.sleep(1)  # its measuring child hangs in its cell
    client.send_signal(signal.SIGKILL)
    client.wait(timeout=10)
    job.wait(timeout=60)  # the parent stopped it (psutil waits for any process)
    stopped = result.read(failed)
    assert stopped["status"] == "error"
    assert stopped["reason"].startswith("stopped: the job received SIGTERM")
    assert not out.exists()


def _modules(profile: str) -> set[str]:
    """The modules imported, from PYTHONPROFILEIMPORTTIME's lines."""
    return {line.rpartition("|")[2].strip() for line in profile.splitlines()
            if line.startswith("import time:")}


def _job_of(tmp_path) -> psutil.Process | None:
    """The `dlbench run` job that this test's warm parent (its environment names tmp_path)
    forked, once the job runs its measuring child."""
    for process in psutil.process_iter(["cmdline"]):
        try:
            if "--warm-parent" in (process.info["cmdline"] or []) \
                    and process.environ().get("DLBENCH_TEST_WARM") == str(tmp_path):
                return next((job for job in process.children() if job.children()), None)
        except psutil.Error:
            continue
    return None
