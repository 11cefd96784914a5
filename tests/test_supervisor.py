"""The supervisor on its own, with a dummy work function that imports no framework: records
in order, a crash or a hang costs only its job, memory is guarded over the whole process
tree, SIGTERM stops the run without losing finished jobs, and handlers are restored."""

import atexit
import faulthandler
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest

from dlbench.measure.sampler import ProcessSampler
from dlbench.run.supervisor import Limits, run_jobs

LIMITS = Limits(timeout_s=5, memory_mb=4096, sample_hz=100)


def work(jobs: list[str], paths: list[Path], start: float, repeat: int) -> None:
    """Each job is an instruction: ok, crash, hang, hog (memory in a grandchild), sleep."""
    for job, path in zip(jobs, paths, strict=True):
        kind = job.split(":")[0]
        if kind == "crash":
            # Planted: without this, pytest's fault handler (inherited by the fork) prints a
            # traceback that reads like a real crash in the test log.
            faulthandler.disable()
            os.kill(os.getpid(), signal.SIGSEGV)
        if kind == "hang":
            time.sleep(60)
        if kind == "hog":  # a worker process of the job holds the memory
            subprocess.run([sys.executable, "-c",
                            "b = bytes([1]) * (600 << 20); import time; time.sleep(60)"])
        if kind == "sleep":
            time.sleep(float(job.split(":")[1]))
        if kind == "temp":  # as TensorFlow's autograph: a module file, removed only at exit
            with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as module:
                atexit.register(os.remove, module.name)
            if job.endswith(":hang"):
                time.sleep(60)
        path.write_text(json.dumps({"job": job, "status": "ok", "pid": os.getpid(),
                                    "started": start, "repeat": repeat,
                                    "tempdir": tempfile.gettempdir()}))


def run(tmp_path, jobs, limits=LIMITS, repeats=1):
    return run_jobs(jobs, work, lambda job: tmp_path / f"{job}.json", limits, repeats,
                    time.time(), lambda record, sampler, gpu: record)


def test_records_in_order_from_one_child(tmp_path):
    records, failures = run(tmp_path, ["a", "b", "c"], repeats=2)
    assert failures == {}
    assert [len(records[j]) for j in "abc"] == [2, 2, 2]
    first, second = {records[j][0]["pid"] for j in "abc"}, {records[j][1]["pid"] for j in "abc"}
    assert len(first) == len(second) == 1 and first != second  # one fresh child per repeat
    assert [records["a"][r]["repeat"] for r in (0, 1)] == [0, 1]
    assert not list(tmp_path.iterdir())  # the child's files are gone


def test_the_childs_temporary_files_go_with_it(tmp_path, monkeypatch):
    """A measuring process ends without the interpreter's teardown, so what its libraries
    remove at exit (TensorFlow's autograph modules) would stay: its temporary files go to a
    folder of its own in the shared one, which the supervisor removes when the child ends —
    done or killed."""
    shared = tmp_path / "tmp"
    shared.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(shared))  # this process's temporary folder
    records, failures = run(tmp_path, ["temp", "temp:hang"],
                            Limits(timeout_s=1, memory_mb=4096, sample_hz=100))
    own = Path(records["temp"][0]["tempdir"])
    assert own.parent == shared and own.name.startswith("dlbench-process-")
    assert failures["temp:hang"].reason.startswith("timed out")
    assert list(shared.iterdir()) == []  # both children's folders, and their files, gone


@pytest.mark.parametrize(("bad", "reason"), [
    ("crash", "crashed: the measuring process was killed by SIGSEGV"),
    ("hang", "timed out: still running after 1 s (measurement.timeout_s)"),
])
def test_a_failing_job_costs_only_itself(tmp_path, bad, reason):
    limits = Limits(timeout_s=1, memory_mb=4096, sample_hz=100)
    records, failures = run(tmp_path, ["a", bad, "c"], limits)
    assert failures[bad].reason == reason and failures[bad].status == "error"
    assert records["a"][0]["status"] == records["c"][0]["status"] == "ok"
    assert records["a"][0]["pid"] != records["c"][0]["pid"]  # a fresh child went on


def test_memory_of_the_whole_tree_is_guarded(tmp_path):
    limits = Limits(timeout_s=20, memory_mb=400, sample_hz=100)
    started = time.monotonic()
    records, failures = run(tmp_path, ["hog", "after"], limits)
    assert failures["hog"].status == "oom", failures
    assert "above the guard's limit of 0.4 GiB" in failures["hog"].reason
    assert time.monotonic() - started < 10  # the tree is looked up once a second
    assert [r["status"] for r in records["after"]] == ["ok"], failures


def test_sigterm_after_the_last_record_keeps_every_result(tmp_path):
    """The bug of v1: a SIGTERM between the child's last record and its exit lost the
    group's results. The jobs are done: they are kept, and none is a failure."""
    jobs = ["a", "b"]

    def work_then_linger(jobs, paths, start, repeat):
        work(jobs, paths, start, repeat)
        time.sleep(3)  # finished, not yet exited: SIGTERM arrives now

    def terminate_when_done():
        while not (tmp_path / ".b.json.child").exists():
            time.sleep(0.05)
        os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=terminate_when_done, daemon=True).start()
    records, failures = run_jobs(jobs, work_then_linger, lambda job: tmp_path / f"{job}.json",
                                 LIMITS, 1, time.time(), lambda r, s, g: r)
    assert failures == {}
    assert [records[j][0]["job"] for j in jobs] == ["a", "b"]


def test_sigterm_while_records_are_read_keeps_them_and_starts_no_child(tmp_path):
    """A SIGTERM outside the wait for a child (here while the supervisor reads the first
    record) keeps every record read and stops before the next child: no exception escapes
    and no child is left behind."""
    def terminate_while_reading(record, sampler, gpu):
        if record["job"] == "a":
            os.kill(os.getpid(), signal.SIGTERM)
        return record

    records, failures = run_jobs(["a", "b"], work, lambda job: tmp_path / f"{job}.json",
                                 LIMITS, 2, time.time(), terminate_while_reading)
    assert [records[j][0]["status"] for j in "ab"] == ["ok", "ok"]
    assert [len(records[j]) for j in "ab"] == [1, 1]  # the second repeat never started
    assert failures["a"].reason.startswith("stopped: the job received SIGTERM")
    assert failures["b"].reason.startswith("not measured: the run was stopped before it")
    assert not list(tmp_path.iterdir())  # no child's file left


def test_sigterm_mid_run_fails_the_rest_and_restores_the_handler(tmp_path):
    before = signal.getsignal(signal.SIGTERM)

    def terminate_soon():
        while not (tmp_path / ".a.json.child").exists():
            time.sleep(0.05)
        os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=terminate_soon, daemon=True).start()
    records, failures = run(tmp_path, ["a", "sleep:30", "c"])
    assert records["a"][0]["status"] == "ok"
    assert failures["sleep:30"].reason.startswith("stopped: the job received SIGTERM")
    assert failures["c"].reason.startswith("not measured: the run was stopped before it")
    assert signal.getsignal(signal.SIGTERM) is before


def test_sampler_counts_the_process_tree():
    """A parent that starts a worker holding 300 MB: the tree's memory includes it."""
    code = ("import subprocess, sys, time; subprocess.Popen([sys.executable, '-c', "
            "'b = bytes([1]) * (300 << 20); import time; time.sleep(30)']); time.sleep(30)")
    parent = subprocess.Popen([sys.executable, "-c", code])
    try:
        sampler = ProcessSampler(parent.pid)
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            sampler.refresh_tree()
            if len(sampler.pids) == 2 and sampler.tree_rss_mb() > 300:
                break
            time.sleep(0.1)
        assert len(sampler.pids) == 2
        assert sampler.tree_rss_mb() > 300
        sampler.close()
    finally:
        for child in __import__("psutil").Process(parent.pid).children(recursive=True):
            child.kill()
        parent.kill()
        parent.wait()


def test_the_child_dies_with_a_killed_supervisor(tmp_path):
    """A supervisor SIGKILLed (its job killed) takes its measuring child with it: no orphan
    measures on unwatched, holding the device lock."""
    import psutil

    code = ("import sys, time; from pathlib import Path; from tests.test_supervisor import run;"
            f" run(Path({str(tmp_path)!r}), ['hang'])")
    # Killed, it cannot remove its child's temporary folder: make it in tmp_path.
    supervisor = subprocess.Popen([sys.executable, "-c", code], cwd=Path(__file__).parents[1],
                                  env={**os.environ, "TMPDIR": str(tmp_path)})
    deadline = time.monotonic() + 30
    while not (children := psutil.Process(supervisor.pid).children()) \
            and time.monotonic() < deadline:
        time.sleep(0.05)
    assert children, "the supervisor started no child"
    supervisor.kill()
    supervisor.wait()
    gone, alive = psutil.wait_procs(children, timeout=5)
    assert not alive, "the measuring child outlived its supervisor"
