"""SLURM for real: a single-node cluster (slurmctld, slurmd and munge from Debian's packages,
with fake GPU devices) is brought up on this machine, the tiny matrix runs through
`snakemake --executor slurm` with the project's slurm profile, and the cluster is torn down
again, stopping only the daemons it started. Needs root on Debian; skipped elsewhere."""

import os
import re
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import pandas as pd
import psutil
import pytest
import yaml

from dlbench.plan import config
from dlbench.plan.matrix import expand_cells
from dlbench.records import result
from dlbench.run import peak
from tests.conftest import BIN, REPO, tool_env

pytestmark = pytest.mark.slow  # end-to-end: `pytest -m "not slow"` skips it

UP, DOWN = REPO / "scripts" / "slurm" / "up.sh", REPO / "scripts" / "slurm" / "down.sh"
RUN_TIMEOUT_S = 480  # the workflow takes about a minute; SIGKILL after this, never a hang

# One framework's eager, on the CPU and on a GPU that the node's fake devices let SLURM
# schedule but that dlbench then finds missing: 2 cells, 2 SLURM jobs. The scheduler is under
# test here, not the frameworks: a second one added 4 jobs (its cells and GEMM peaks), each
# a job's start-up and a status check more, to a test that waits on them one at a time.
SLURM_CONFIG = {
    "frameworks": ["pytorch"],
    "models": ["tiny-bert"],
    "devices": ["cpu", "gpu"],
    "batch_sizes": [1],
    "sequence_lengths": [8],
    "optimizations": ["eager"],
    # The peaks' libraries do not wait for a quiet machine: the tests run two at a time.
    "measurement": {"warmup_iterations": 1, "min_duration_s": 0.05, "min_iterations": 3,
                    "target_ci": 0, "threads": min(2, os.cpu_count() or 1),
                    "quiet_wait_s": 0},
}
SUBMITTED = re.compile(r"has been submitted with SLURM jobid (\d+) \(log: (\S+)\)")


def _why_not_here() -> str | None:
    if os.name != "posix" or os.geteuid() != 0:
        return "needs root: it installs Debian's slurm packages and starts slurmd as root"
    if not Path("/etc/debian_version").exists() or shutil.which("apt-get") is None:
        return "needs Debian with apt-get: the cluster comes from Debian's slurm packages"
    if shutil.which("mknod") is None or shutil.which("runuser") is None:
        return "needs mknod and runuser (fake GPU devices, munged as user munge)"
    return None


@pytest.fixture(scope="module")
def cluster():
    reason = _why_not_here()
    if reason:
        pytest.skip(f"real SLURM test: {reason}")
    # Under /tmp directly: munged (user munge) must reach its socket in here.
    scratch = Path(tempfile.mkdtemp(prefix="dlbench-slurm-", dir="/tmp"))
    try:
        up = subprocess.run(["timeout", "-s", "KILL", "300", str(UP), str(scratch)],
                            capture_output=True, text=True, env=tool_env(slurm=True))
        assert up.returncode == 0, f"scripts/slurm/up.sh failed:\n{up.stdout}{up.stderr}"
        yield scratch
    finally:
        down = subprocess.run(["timeout", "-s", "KILL", "120", str(DOWN), str(scratch)],
                              capture_output=True, text=True, env=tool_env(slurm=True))
        assert down.returncode == 0, down.stdout + down.stderr
        assert not scratch.exists()


# -- a job stopped by the scheduler ------------------------------------------------------------

STOPPED = "pytorch_tiny-bert_cpu_b1_s8_eager"


def _running_cell_job(cell: str, seen: list[str]) -> str | None:
    """The id of a new SLURM job of the cell whose measuring child is running (its
    supervisor then handles SIGTERM), if there is one. The supervisor must be that job's
    (its SLURM_JOB_ID): the previous job's, cancelled, may still be winding down while
    the next one starts, and cancelling the next one then would stop it before it measures."""
    queue = subprocess.run(["squeue", "-h", "-t", "RUNNING", "-o", "%i %k"],
                           capture_output=True, text=True, timeout=30, check=True,
                           env=tool_env(slurm=True)).stdout
    for job_id, comment in (line.split(maxsplit=1) for line in queue.splitlines()):
        if comment == f"rule_measure_cell_wildcards_{cell}" and job_id not in seen:
            for process in psutil.process_iter(["cmdline"]):
                cmdline = process.info["cmdline"] or []
                if "dlbench" in cmdline and f"results/runs/{cell}.json" in cmdline \
                        and process.children() and _slurm_job_of(process) == job_id:
                    return job_id
    return None


def _slurm_job_of(process: psutil.Process) -> str | None:
    try:
        return process.environ().get("SLURM_JOB_ID")
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return None


def _workflow(workdir: Path) -> list[str]:
    """The command of a run of the matrix in workdir through the slurm profile."""
    return [
        "timeout", "-s", "KILL", str(RUN_TIMEOUT_S),
        str(BIN / "snakemake"), "--snakefile", str(REPO / "Snakefile"),
        "--directory", str(workdir), "--configfile", str(workdir / "config.yaml"),
        "--workflow-profile", str(REPO / "workflow" / "profiles" / "slurm"),
        # A test cluster: status checks from the first second (MinJobAge=600 keeps squeue
        # reliable), memory that fits any test machine (still growing with the attempt).
        "--slurm-init-seconds-before-status-checks", "1",
        "--set-resources", "measure_cell:mem_mb=1000*attempt", "measure_cell:runtime=10",
    ]


def _submitted(output: str) -> list[tuple[tuple[str, str], str]]:
    """(rule, wildcards) and SLURM job id of every job submitted, from the log's lines
    (.snakemake/slurm_logs/rule_<rule>/<wildcards>/<id>.log)."""
    return [((Path(log).parent.parent.name.removeprefix("rule_"), Path(log).parent.name),
             job_id) for job_id, log in SUBMITTED.findall(output)]


@pytest.fixture(scope="module")
def slurm_run(cluster, tmp_path_factory):
    """The matrix as SLURM jobs, in two runs. In the first, one cell hangs (a planted
    fault) and each SLURM job of it is cancelled with scancel once it measures: the profile
    submits it once more, that is cancelled too, and the run fails, every other cell
    measured (keep-going); its results folder is kept aside as that run left it. The
    second run, without the fault, measures that cell alone and ends the workflow.
    (One run of the matrix for both: a run of its own for the stopped cell took a minute.)"""
    workdir = tmp_path_factory.mktemp("slurm-matrix")
    (workdir / "config.yaml").write_text(yaml.safe_dump(SLURM_CONFIG))
    start = time.monotonic()
    log = workdir / "snakemake-stopped.out"  # a file: a full pipe would stall Snakemake
    with log.open("w") as out:
        run = subprocess.Popen(_workflow(workdir), stdout=out, stderr=subprocess.STDOUT,
                               env=tool_env(slurm=True, DLBENCH_TEST_FAULT=f"hang@{STOPPED}"))
        cancelled: list[str] = []
        deadline = time.monotonic() + RUN_TIMEOUT_S
        while len(cancelled) < 2 and run.poll() is None and time.monotonic() < deadline:
            job_id = _running_cell_job(STOPPED, cancelled)
            if job_id:
                subprocess.run(["scancel", job_id], check=True, timeout=30,
                               env=tool_env(slurm=True))
                cancelled.append(job_id)
            time.sleep(0.5)
        run.wait(timeout=RUN_TIMEOUT_S)
    stopped_output = log.read_text()
    assert run.returncode not in (-9, 137), f"killed after {RUN_TIMEOUT_S}s:\n" \
        + stopped_output[-6000:]
    failed_run = tmp_path_factory.mktemp("slurm-failed-run")
    shutil.copytree(workdir / "results", failed_run / "results")
    stopped = {"cancelled": cancelled, "returncode": run.returncode,
               "output": stopped_output, "results": failed_run / "results"}

    finish = subprocess.run(_workflow(workdir), capture_output=True, text=True,
                            env=tool_env(slurm=True))
    elapsed = time.monotonic() - start
    output = finish.stdout + finish.stderr
    (workdir / "snakemake.out").write_text(output)
    assert finish.returncode == 0, f"rc={finish.returncode} after {elapsed:.0f}s:\n" \
        + output[-6000:]
    first, second = _submitted(stopped_output), _submitted(output)
    jobs: dict[tuple[str, str], list[str]] = {}  # (rule, wildcards) → its SLURM job ids
    for key, job_id in first + second:
        jobs.setdefault(key, []).append(job_id)
    # Every job once, but the stopped cell's: twice in the first run, once in the second.
    assert [key for key, _ in second] == [("measure_cell", STOPPED)], output[-3000:]
    assert {key: len(ids) for key, ids in jobs.items() if len(ids) > 1} == {
        ("measure_cell", STOPPED): 3}, stopped_output[-3000:]
    print(f"slurm workflow: {elapsed:.0f}s, {len(first) + len(second)} SLURM jobs")
    return workdir, jobs, stopped_output + output, stopped


@pytest.fixture(scope="module")
def cells():
    return expand_cells(config.validate(SLURM_CONFIG))


def _job(job_id: str) -> dict[str, str]:
    """`scontrol show job` as key → value (finished jobs stay visible for MinJobAge)."""
    shown = subprocess.run(["scontrol", "-o", "show", "job", job_id], capture_output=True,
                           text=True, timeout=30, check=True, env=tool_env(slurm=True)).stdout
    return dict(re.findall(r"([\w/:]+)=(\S*)", shown))


def test_every_cell_ran_as_its_own_slurm_job(slurm_run, cells):
    workdir, all_jobs, output, _ = slurm_run
    # Each cell's last job (the stopped cell's two cancelled ones: the test below).
    jobs = {name: ids[-1] for (rule, name), ids in all_jobs.items() if rule == "measure_cell"}
    assert sorted(jobs) == sorted(c.id for c in cells)
    assert len(set(jobs.values())) == len(cells)
    # Besides the cells, only the machine's GEMM peak of each library per device (on the
    # cells' nodes) and the correctness references: the model's weights once, and one
    # reference output for the one batch and length.
    others = sorted(key for key in all_jobs if key[0] != "measure_cell")
    threads = SLURM_CONFIG["measurement"]["threads"]
    libraries = sorted(("peak_library", f"{device}_fp32_{threads}_{key}")
                       for key, library in peak.LIBRARIES.items()
                       if library.framework in SLURM_CONFIG["frameworks"]
                       for device in library.devices)
    assert others == libraries + [("reference_output", "tiny-bert_1_8"),
                                  ("reference_weights", "tiny-bert")]
    # The cheap rules run in the Snakemake process itself, not as cluster jobs (the peak
    # only joins the libraries' records).
    for rule in ("aggregate", "report", "peak"):
        assert f"localrule {rule}:" in output
    queue = subprocess.run(["squeue", "-h", "-t", "all", "-o", "%i"], capture_output=True,
                           text=True, timeout=30, check=True,
                           env=tool_env(slurm=True)).stdout.split()
    assert sorted(queue) == sorted(job for ids in all_jobs.values() for job in ids), \
        "these jobs, and nothing else, ran"
    for cell in cells:
        job = _job(jobs[cell.id])
        assert job["JobState"] == "COMPLETED", (cell.id, job["JobState"])
        assert job["Comment"] == f"rule_measure_cell_wildcards_{cell.id}"
        log = workdir / ".snakemake" / "slurm_logs" / "rule_measure_cell" / cell.id
        assert (log / f"{jobs[cell.id]}.log").is_file()  # kept by the profile
        if cell.unsupported_reason() is None and cell.device == "gpu":
            assert job.get("TresPerJob") == "gres:gpu:1", (cell.id, job)
        if cell.unsupported_reason() is None and cell.device == "cpu":
            assert job["OverSubscribe"] == "NO", (cell.id, "not --exclusive")
            assert job["CPUs/Task"] == str(SLURM_CONFIG["measurement"]["threads"])


def test_every_cell_writes_a_valid_json(slurm_run, cells):
    workdir, _, _, _ = slurm_run
    for cell in cells:
        record = result.read(workdir / "results" / "runs" / f"{cell.id}.json")
        assert record["environment"]["hostname"] == socket.gethostname()
        expected_reason = cell.unsupported_reason()
        if expected_reason:
            assert (record["status"], record["reason"]) == ("unsupported", expected_reason)
        elif cell.device == "gpu":  # scheduled on a fake GPU, then found missing
            assert record["status"] == "unsupported" and "GPU" in record["reason"]
        else:
            assert record["status"] == "ok", (cell.id, record["reason"])


def test_summary_and_report_are_complete(slurm_run, cells):
    workdir, _, _, _ = slurm_run
    summary = pd.read_parquet(workdir / "results" / "summary.parquet")
    assert sorted(summary["cell_id"]) == sorted(c.id for c in cells)
    assert set(summary.loc[summary["status"] == "ok", "framework"]) == {"pytorch"}
    html = (workdir / "report" / "report.html").read_text()
    assert "PyTorch" in html and "N/A" in html


def test_a_job_cancelled_twice_is_retried_once_and_ends_as_error(slurm_run):
    """The first run of the fixture, as it left its results folder."""
    _, jobs, _, stopped = slurm_run
    cancelled, results, output = stopped["cancelled"], stopped["results"], stopped["output"]
    assert len(cancelled) == 2, output[-4000:]  # the profile submitted it once more …
    assert stopped["returncode"] != 0  # … and no more
    assert jobs[("measure_cell", STOPPED)][:2] == cancelled
    assert [_job(job)["JobState"] for job in cancelled] == ["CANCELLED", "CANCELLED"]
    assert not (results / "runs" / f"{STOPPED}.json").exists()
    record = result.read(results / "failed" / f"{STOPPED}.json")
    reasons = [f"stopped by SLURM: job {job} was cancelled (scancel) and received SIGTERM"
               for job in cancelled]
    assert (record["status"], record["reason"]) == ("error", reasons[1])
    assert [(a["status"], a["kept"], a["reason"]) for a in record["attempts"]] == [
        ("error", False, reasons[0]), ("error", True, reasons[1])]
    # The summary and the report of the failed run (onerror) say so.
    summary = pd.read_parquet(results / "summary.parquet").set_index("cell_id")
    assert (summary.loc[STOPPED, "status"], summary.loc[STOPPED, "reason"]) == (
        "error", reasons[1])
    assert summary.loc[STOPPED, "attempts"] == 2
    assert not summary.drop(index=STOPPED)["status"].eq("error").any()  # the others ran
