"""Faults while running, each injected for real (DLBENCH_TEST_FAULT, set only by tests):
a bad cell costs that cell and nothing more, and nothing half-written is left behind."""

import json
import os
import re
import signal
import subprocess
import sys
import time
from datetime import datetime

import pandas as pd
import psutil
import pytest

from dlbench.files import paths
from dlbench.plan import config
from dlbench.plan.matrix import expand_cells
from dlbench.records import result
from tests.conftest import REPO, TINY_RUN, snakemake, start_from, tiny_config, tool_env

PROFILE = ["--workflow-profile", str(REPO / "workflow" / "profiles" / "default")]
SUMMARY = paths.SUMMARY_PARQUET  # a target that stops a run before the report (aggregate.smk)
CELL = ["--framework=pytorch", "--model=tiny-bert", "--device=cpu", "--batch=1", "--seqlen=8",
        "--optimization=eager", "--warmup-iterations=1", "--min-duration-s=0.05",
        "--min-iterations=3"]
# Two frameworks (the faults are the workflow's, not a framework's), both optimizations:
# 3 measured cells, 1 unsupported.
SMALL = tiny_config(frameworks=["pytorch", "tensorflow"], models=["tiny-bert"], devices=["cpu"],
                    batch_sizes=[1], sequence_lengths=[8], measurement={"timeout_s": 60})


def run_cell(tmp_path, fault: str, *extra: str):
    out, failed = tmp_path / "runs" / "cell.json", tmp_path / "failed" / "cell.json"
    done = subprocess.run(
        [sys.executable, "-m", "dlbench", "run", *CELL, *extra, f"--out={out}",
         f"--failed-out={failed}"],
        capture_output=True, text=True, timeout=120, env=tool_env(DLBENCH_TEST_FAULT=fault),
    )
    written = out if out.exists() else failed
    return done.returncode, result.read(written), out.exists(), failed.exists()


def test_exception_is_an_error_result_and_the_job_succeeds(tmp_path):
    code, record, out, failed = run_cell(tmp_path, "raise")
    assert (code, out, failed) == (0, True, False)
    assert record["status"] == "error"
    assert record["reason"] == "PlantedFault: planted fault in pytorch_tiny-bert_cpu_b1_s8_eager"


@pytest.mark.slow
def test_allocating_without_limit_is_stopped_as_oom(tmp_path):
    code, record, out, _ = run_cell(tmp_path, "oom", "--max-host-memory-gib=1.5")
    assert (code, out) == (0, True)
    assert record["status"] == "oom"
    assert "above the guard's limit of 1.5 GiB" in record["reason"]


@pytest.mark.slow
@pytest.mark.parametrize(("fault", "reason"), [
    ("crash", "crashed: the measuring process was killed by SIGSEGV"),
    ("kill", "crashed: the measuring process was killed by SIGKILL"),
    ("hang", "timed out: still running after 8 s (measurement.timeout_s)"),
])
def test_crash_or_hang_fails_the_job_and_keeps_a_record(tmp_path, fault, reason):
    started = time.monotonic()
    code, record, out, failed = run_cell(tmp_path, fault, "--timeout-s=8")
    assert (code, out, failed) == (1, False, True)
    assert (record["status"], record["reason"]) == ("error", reason)
    assert time.monotonic() - started < 60  # a hang is cut at the limit, not waited out


@pytest.mark.slow
def test_a_later_success_clears_the_failed_record(tmp_path):
    run_cell(tmp_path, "crash")
    code, record, out, failed = run_cell(tmp_path, "")
    assert (code, record["status"], out, failed) == (0, "ok", True, False)


def test_fault_switch_is_not_reachable_from_a_config():
    with pytest.raises(config.ConfigError, match="unknown config key 'fault'"):
        config.validate({**SMALL, "fault": "crash"})


@pytest.mark.slow
def test_two_cells_started_together_take_turns(tmp_path):
    """The device lock alone, without Snakemake: two timing cells never overlap."""
    outs = [tmp_path / f"runs/cell{i}.json" for i in range(2)]
    processes = [
        subprocess.Popen([sys.executable, "-m", "dlbench", "run", *CELL, f"--out={out}",
                          "--min-duration-s=1"], env=tool_env(), stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL)
        for out in outs
    ]
    assert [p.wait(timeout=120) for p in processes] == [0, 0]
    (a_start, a_end), (b_start, b_end) = sorted(
        (_time(r["device_lock"]["acquired_at"]), _time(r["device_lock"]["released_at"]))
        for r in map(result.read, outs))
    assert a_end <= b_start
    waits = sorted(result.read(out)["startup"]["lock_wait_s"] for out in outs)
    assert waits[0] < 0.5 < waits[1]  # the second one waited for the first


def _time(stamp: str) -> datetime:
    return datetime.fromisoformat(stamp)


# -- the training half: its input pipeline's faults -------------------------------------------

TRAIN_CELL = ["--scenario=training", "--model=cnn", "--device=cpu", "--dataset=synthetic",
              "--optimizer=sgd", "--optimization=eager", "--epochs=1",
              "--warmup-iterations=1", "--no-ablation"]
TRAIN_TIMEOUT_S = 60  # each fault must end its cell in a fraction of this


@pytest.fixture
def loader_data(tmp_path):
    """256 images (8 batches of 32: a fault at image 65 strikes mid-epoch), the test's
    own: the file faults spoil them."""
    from dlbench.data import __main__ as data_cli

    folder = tmp_path / "data" / "synthetic"
    data_cli.build("synthetic", folder, 256, 50, 0)
    return folder


def run_training_fault(tmp_path, data, framework: str, fault: str, *extra: str):
    """`dlbench run` of one training cell (w2, batch 32) with a planted fault: its exit
    status, its record (kept or failed), whether it was kept, and the seconds it took
    (less any wait for the device lock, which other measurements on the host may hold)."""
    out, failed = tmp_path / "runs" / "cell.json", tmp_path / "failed" / "cell.json"
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "dlbench", "run", *TRAIN_CELL, f"--framework={framework}",
         "--pipeline=w2", "--batch=32", f"--data={data}", f"--timeout-s={TRAIN_TIMEOUT_S}",
         *extra, f"--out={out}", f"--failed-out={failed}"],
        capture_output=True, text=True, timeout=300, env=tool_env(DLBENCH_TEST_FAULT=fault))
    assert out.exists() != failed.exists(), done.stdout[-2000:] + done.stderr[-3000:]
    record = result.read(out if out.exists() else failed)
    elapsed = time.monotonic() - started - record["startup"]["lock_wait_s"]
    return done.returncode, record, out.exists(), elapsed


@pytest.mark.slow
def test_a_killed_loader_worker_is_a_crash_of_its_cell_reported_at_once(tmp_path, loader_data):
    """A DataLoader worker SIGKILLed mid-epoch: the cell is a crash (kept as failed, its
    job fails, a re-run measures it again), named as such, seconds after the kill."""
    code, record, kept, elapsed = run_training_fault(tmp_path, loader_data, "pytorch",
                                                     "kill-loader")
    assert (code, kept, record["status"]) == (1, False, "error")
    # Told by DataLoader's SIGCHLD handler, or by its check while waiting for a batch.
    assert re.fullmatch(r"crashed: a loader worker died: DataLoader worker \(pid(\(s\))? \d+\) "
                        r"(is killed by signal: Killed\.|exited unexpectedly)", record["reason"]), \
        record["reason"]
    assert elapsed < TRAIN_TIMEOUT_S / 2, elapsed


@pytest.mark.slow
def test_a_group_goes_on_after_a_killed_loader_worker(tmp_path, loader_data):
    """In one process with other cells, the cell whose worker died is `error` and the
    next cell trains as if nothing happened (fresh workers)."""
    runs = tmp_path / "runs"
    done = subprocess.run(
        [sys.executable, "-m", "dlbench", "run", *TRAIN_CELL, "--framework=pytorch",
         "--pipeline=w2", "--batch", "32", "64", f"--data={loader_data}",
         f"--timeout-s={TRAIN_TIMEOUT_S}", f"--out-dir={runs}"],
        capture_output=True, text=True, timeout=300,
        env=tool_env(DLBENCH_TEST_FAULT="kill-loader@.*_b32_.*"))
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    records = {p.stem.split("_")[4]: result.read(p) for p in runs.glob("*.json")}
    assert records["b32"]["status"] == "error"
    assert records["b32"]["reason"].startswith("crashed: a loader worker died")
    assert records["b64"]["status"] == "ok", records["b64"]["reason"]


@pytest.mark.slow
def test_the_memory_guard_counts_the_loader_workers(tmp_path, loader_data):
    """A DataLoader worker that allocates 4 GiB: the guard sees the whole process tree and
    stops the cell as `oom` (were it blind to the workers, the cell would time out)."""
    code, record, kept, elapsed = run_training_fault(
        tmp_path, loader_data, "pytorch", "oom-loader", "--max-host-memory-gib=2.5")
    assert (code, kept, record["status"]) == (0, True, "oom"), record["reason"]
    assert "above the guard's limit of 2.5 GiB" in record["reason"]
    assert elapsed < TRAIN_TIMEOUT_S / 2, elapsed


@pytest.mark.slow
@pytest.mark.parametrize(("fault", "error"), [
    ("vanish-file", r"/\S+\.png: listed in the manifest, missing; .*"),
    ("corrupt-file", r"/\S+\.png: not a readable PNG .*"),
])
def test_a_training_file_spoiled_mid_epoch_is_the_cells_error(tmp_path, loader_data, fault,
                                                              error):
    """TensorFlow: a file deleted, or overwritten with bytes that are no PNG, after a few
    batches: the cell is `error` (the data set is wrong: no re-run helps) with the file's
    problem, at once."""
    code, record, kept, elapsed = run_training_fault(tmp_path, loader_data, "tensorflow",
                                                     fault)
    assert (code, kept, record["status"]) == (0, True, "error")
    # The file named (a scan of the set: tf.data's decode error does not name it), and when.
    assert re.fullmatch(rf"DataSetError: {error} \(epoch 1, after \d batches\)",
                        record["reason"]), record["reason"]
    assert elapsed < TRAIN_TIMEOUT_S / 2, elapsed


# -- a job stopped by its scheduler, and tried again -------------------------------------------


def _stop_a_hanging_cell(tmp_path) -> int:
    """`dlbench run` of CELL, hanging, stopped by SIGTERM once its measuring child runs (as
    SLURM stops a job: scancel, the time limit); its exit status."""
    out, failed = tmp_path / "runs" / "cell.json", tmp_path / "failed" / "cell.json"
    process = subprocess.Popen(
        [sys.executable, "-m", "dlbench", "run", *CELL, f"--out={out}", f"--failed-out={failed}"],
        env=tool_env(DLBENCH_TEST_FAULT="hang"), stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while not psutil.Process(process.pid).children() and time.monotonic() < deadline:
        time.sleep(0.1)  # the child is forked once the supervisor handles SIGTERM
    process.send_signal(signal.SIGTERM)
    return process.wait(timeout=60)


@pytest.mark.slow
def test_the_attempts_of_a_job_stopped_twice_are_counted(tmp_path):
    """Stopped twice, the cell's failed record counts two attempts and says why; the job
    that then measures it counts three, the kept one last."""
    stopped = "stopped: the job received SIGTERM (cancelled, or past the scheduler's time limit)"
    assert _stop_a_hanging_cell(tmp_path) == 1
    assert _stop_a_hanging_cell(tmp_path) == 1
    failed = result.read(tmp_path / "failed" / "cell.json")
    assert (failed["status"], failed["reason"]) == ("error", stopped)
    assert [(a["status"], a["kept"], a["reason"]) for a in failed["attempts"]] == [
        ("error", False, stopped), ("error", True, stopped)]

    code, record, out, kept_failed = run_cell(tmp_path, "")
    assert (code, record["status"], out, kept_failed) == (0, "ok", True, False)
    assert [(a["status"], a["kept"]) for a in record["attempts"]] == [
        ("error", False), ("error", False), ("ok", True)]
    assert record["attempts"][-1]["median_ms"] == record["timing"]["median_ms"]


@pytest.mark.parametrize(("fields", "why"), [
    ({"JobState": "COMPLETING", "Reason": "TimeLimit", "TimeLimit": "00:01:00"},
     "reached its time limit (00:01:00)"),
    ({"JobState": "COMPLETING", "Reason": "None"}, "was cancelled (scancel)"),
    ({"JobState": "COMPLETING", "Reason": "Preempted"}, "was stopped (Preempted)"),
])
def test_slurms_reason_for_a_stop(fields, why):
    """What `scontrol show job` says of a job that has just received SIGTERM (seen on
    Slurm 22.05: COMPLETING, with the time limit as its reason, or none after scancel)."""
    from dlbench.run.scheduler import slurm_reason

    assert slurm_reason("7", fields) == f"stopped by SLURM: job 7 {why} and received SIGTERM"


@pytest.mark.slow
def test_recoverys_stand_in_for_a_missing_record_is_no_attempt(tmp_path):
    """The record that recovery writes for a cell without one (its job killed outright, or
    never started) is no known attempt: the job that measures the cell counts none."""
    from dlbench import recovery
    from dlbench.plan import settings

    cell = next(c for c in expand_cells(config.validate(SMALL))
                if c.id == "pytorch_tiny-bert_cpu_b1_s8_eager")
    (tmp_path / "failed").mkdir()
    [stand_in] = recovery.records([cell], settings.defaults(), tmp_path / "runs",
                                  tmp_path / "failed")
    stand_in.rename(tmp_path / "failed" / "cell.json")
    code, record, out, failed = run_cell(tmp_path, "")
    assert (code, record["status"], out, failed) == (0, "ok", True, False)
    assert "attempts" not in record


def test_recovery_without_the_reports_packages_still_writes_the_summary(tmp_path):
    """A failed run on a node set up for the frameworks alone (seen on a GPU machine, whose
    Snakemake had no BeautifulSoup): the onerror handler writes the summary, says why there
    is no report, and does not fail itself; the same call with the packages renders it
    (test_crashed_cell_is_reported_and_only_it_is_retried)."""
    script = f"""
import sys
sys.modules["bs4"] = None  # as if not installed: importing it raises ImportError
from pathlib import Path
from dlbench.plan import config, settings
from dlbench.plan.matrix import expand_cells
from dlbench import recovery
cells = expand_cells(config.validate({SMALL!r}))
Path("results/failed").mkdir(parents=True)
recovery.records(cells[:1], settings.defaults(), Path("results/runs"), Path("results/failed"))
recovery.summarize_failed_run(cells, settings.defaults(), Path({str(REPO)!r}) / "nowhere.py")
"""
    done = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, capture_output=True,
                          text=True, timeout=120, env=tool_env())
    assert done.returncode == 0, done.stderr
    assert "no report: " in done.stdout and "bs4" in done.stdout, done.stdout
    summary = pd.read_csv(tmp_path / "results" / "summary.csv")
    assert len(summary) == len(expand_cells(config.validate(SMALL)))
    assert set(summary["status"]) == {"error"}  # no cell wrote a record
    assert not (tmp_path / "report" / "report.html").exists()


# -- runs of the workflow from the shared one (`measured_once`): last, so that another
# worker's test has made it meanwhile, rather than this one waiting for it -------------


def _statuses(workdir) -> dict[str, str]:
    summary = pd.read_parquet(workdir / "results" / "summary.parquet")
    return dict(zip(summary["cell_id"], summary["status"], strict=True))


@pytest.mark.slow
def test_crashed_cell_is_reported_and_only_it_is_retried(tmp_path, measured_once):
    crashed = "tensorflow_tiny-bert_cpu_b1_s8_eager"
    start_from(measured_once, tmp_path)
    first = _snakemake_with_fault(tmp_path, f"crash@{crashed}")
    assert first.returncode != 0  # the job failed ...
    statuses = _statuses(tmp_path)  # ... the others ran, and the summary says why
    assert statuses.pop(crashed) == "error"
    assert sorted(statuses.values()) == ["ok", "ok", "unsupported"]
    html = (tmp_path / "report" / "report.html").read_text()
    assert "crashed: the measuring process was killed by SIGSEGV" in html
    before = _mtimes(tmp_path)

    # Up to the summary: what the retry re-ran is checked, not its report (the first run's
    # is read above); rendering it would cost ~7 s of CPU.
    second = snakemake(tmp_path, SMALL, *PROFILE, "--cores", "2", SUMMARY)
    assert second.returncode == 0, second.stderr[-2000:]
    assert "cell=" + crashed in second.stdout + second.stderr
    after = _mtimes(tmp_path)
    assert {c for c in after if after[c] != before.get(c)} == {crashed}  # only it re-ran
    assert set(_statuses(tmp_path).values()) == {"ok", "unsupported"}
    assert not (tmp_path / "results" / "failed" / f"{crashed}.json").exists()


def _snakemake_with_fault(workdir, fault: str):
    os.environ["DLBENCH_TEST_FAULT"] = fault
    try:
        return snakemake(workdir, SMALL, *PROFILE, "--cores", "2")
    finally:
        del os.environ["DLBENCH_TEST_FAULT"]


def _mtimes(workdir) -> dict[str, float]:
    return {p.stem: p.stat().st_mtime for p in (workdir / "results" / "runs").glob("*.json")}


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGKILL])
def test_interrupted_run_leaves_nothing_half_written_and_resumes(tmp_path, sig, measured_once):
    start_from(measured_once, tmp_path)
    slow = {**SMALL, "measurement": {**SMALL["measurement"], "min_duration_s": 2}}
    (tmp_path / "config.yaml").write_text(json.dumps(slow))
    command = [sys.executable.replace("python", "snakemake").rsplit("/", 1)[0] + "/snakemake",
               "--snakefile", str(REPO / "Snakefile"), "--directory", str(tmp_path),
               "--configfile", str(tmp_path / "config.yaml"), *PROFILE, "--cores", "2"]
    runs = tmp_path / "results" / "runs"
    # As from a terminal: a shell that runs the tests in the background has them ignore
    # SIGINT, and the ignoring would be inherited.
    process = subprocess.Popen(command, env=tool_env(), stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL, start_new_session=True,
                               preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.monotonic() + 120
    while len(list(runs.glob("*.json"))) < 2 and time.monotonic() < deadline:
        time.sleep(0.2)
    finished = {p.stem for p in runs.glob("*.json")}
    time.sleep(3)  # their jobs have ended and Snakemake has recorded it; others are running
    os.killpg(process.pid, sig)  # Ctrl-C reaches the whole process group, as in a terminal
    process.wait(timeout=60)

    assert not (tmp_path / "results" / "summary.parquet").exists()
    assert not (tmp_path / "report" / "report.html").exists()
    assert not list(tmp_path.rglob("*.tmp"))  # no temporary left by an atomic write
    kept = {p.stem: result.read(p)["started_at"] for p in runs.glob("*.json")}  # all whole
    assert kept

    if sig == signal.SIGKILL:  # a killed Snakemake leaves its lock; it says to do this
        assert snakemake(tmp_path, slow, "--unlock").returncode == 0
    # Up to the summary: what the rerun measured again is checked, not its report (the
    # interrupted run above is the full workflow, so that its report could be left over).
    rerun = snakemake(tmp_path, slow, *PROFILE, "--cores", "2", SUMMARY)
    assert rerun.returncode == 0, rerun.stderr[-2000:]
    cells = expand_cells(config.validate(slow))
    assert sorted(_statuses(tmp_path)) == sorted(c.id for c in cells)
    remeasured = {c for c, started in kept.items()
                  if result.read(runs / f"{c}.json")["started_at"] != started}
    # Cells whose jobs had finished are kept; only those missing or still running (which
    # Snakemake cannot know to be complete) are measured again.
    assert finished and not remeasured & finished, rerun.stdout[-3000:]


@pytest.mark.slow
def test_timing_cells_never_overlap_under_load(tiny_workflow):
    """--cores 4 on 2 cores (the shared tiny workflow's run): measuring cells wait for the
    device, the others do not."""
    records = [result.read(p) for p in (tiny_workflow / "results" / "runs").glob("*.json")]
    windows = sorted(
        (_time(r["device_lock"]["acquired_at"]), _time(r["device_lock"]["released_at"]))
        for r in records if r["status"] == "ok"
    )
    measured = [c for c in expand_cells(config.validate(TINY_RUN))
                if c.device == "cpu" and not c.unsupported_reason()]
    assert len(windows) == len(measured) > 1
    for (_, end), (start, _) in zip(windows, windows[1:], strict=False):
        assert end <= start, "two timing cells held the CPU at the same time"
    # The jobs that time nothing (here: recording unsupported cells) are not serialized:
    # some of their processes (started_at is the process start) ran at the same time.
    others = sorted((_time(r["started_at"]), _time(r["finished_at"]))
                    for r in records if r["status"] == "unsupported")
    pairs = zip(others, others[1:], strict=False)
    assert any(b_start < a_end for (_, a_end), (b_start, _) in pairs), (
        "the jobs that time nothing ran one at a time")
