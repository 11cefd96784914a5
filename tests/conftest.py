"""Shared helpers: the repository, and running the real `snakemake` on a config."""

import contextlib
import copy
import fcntl
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
import yaml
from filelock import FileLock

from dlbench.catalogue import frameworks

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent

# A matrix of the tiny models that runs in about two minutes: every framework, every
# optimization, a length beyond the tiny models' 64 positions and a GPU that is not here.
TINY_CONFIG = {
    "frameworks": list(frameworks.REGISTERED),
    "devices": ["cpu", "gpu"],
    "inference": {
        "models": ["tiny-bert", "tiny-gpt2"],
        "batch_sizes": [1, 2],
        "sequence_lengths": [8, 128],
        "optimizations": ["eager", "graph"],
    },
    # Fixed, short timed loops (adaptive stopping off): the plumbing is under test here.
    # The peaks' libraries do not wait for a quiet machine: the tests run two at a time.
    "measurement": {"warmup_iterations": 1, "min_duration_s": 0.05, "min_iterations": 3,
                    "target_ci": 0, "quiet_wait_s": 0},
}


def tiny_config(measurement: dict | None = None, **changes) -> dict:
    """TINY_CONFIG with changes: keys of its inference section go there, the others to the
    top level; measurement keys are merged into its measurement section."""
    config = copy.deepcopy(TINY_CONFIG)
    for key, value in changes.items():
        (config["inference"] if key in config["inference"] else config)[key] = value
    config["measurement"].update(measurement or {})
    return config


# Snakemake's SLURM executor plugin runs `scontrol show config` whenever Snakemake starts
# (for its settings' help text). With SLURM's client installed (setup.sh --test) and no
# controller running, scontrol looks for one (through DNS, or at a slurm.conf's controller)
# until the plugin gives up after 10 s: on CI the tests that start Snakemake took ~10 s
# more per start than here (tests/test_run_lock.py: 63 s against 16 s, 2026-11-29), and
# here `snakemake --version` took 10.0 s against 1.0 s while an old slurm.conf named a
# controller that had gone. An empty SLURM configuration makes scontrol fail at once; the
# SLURM test's commands get the real one (tool_env(slurm=True)).
if "DLBENCH_USERS_SLURM_CONF" not in os.environ:  # the first import: xdist's workers inherit
    os.environ["DLBENCH_USERS_SLURM_CONF"] = os.environ.get("SLURM_CONF", "")
    os.environ["SLURM_CONF"] = os.devnull
_USERS_SLURM_CONF = os.environ["DLBENCH_USERS_SLURM_CONF"] or None
# The warm parents that tests switch on (dlbench.warm, ~200-400 MB each, one per
# environment) go after 30 s idle, not the users' 3 min.
os.environ.setdefault("DLBENCH_WARM_PARENT_IDLE_S", "30")


def tool_env(slurm: bool = False, **extra: str) -> dict[str, str]:
    """The environment with this virtualenv's tools first on PATH, as after `activate`, and
    this checkout's dlbench first on the path (whichever checkout the venv was set up in);
    with `slurm`, SLURM's own configuration (see above)."""
    env = dict(os.environ, PATH=f"{BIN}{os.pathsep}{os.environ['PATH']}",
               PYTHONPATH=str(REPO / "src"), **extra)
    if slurm:
        env.pop("SLURM_CONF")
        env.pop("DLBENCH_USERS_SLURM_CONF")
        if _USERS_SLURM_CONF is not None:
            env["SLURM_CONF"] = _USERS_SLURM_CONF
    return env


def one_framework(framework: str, code: str) -> str:
    """`python -c` code run as dlbench runs a process of one framework (a measuring child,
    a reference or a peak job): the other frameworks and the libraries none of its cells
    uses marked absent (frameworks.leave_out_unused_imports), which transformers would
    otherwise import, scikit-learn and with it JAX: ~2 s of CPU more in every PyTorch or
    TensorFlow process that builds a model, on 2 cores (2026-12-01)."""
    return ("from dlbench.catalogue.frameworks import leave_out_unused_imports\n"
            f"leave_out_unused_imports({framework!r})\n{code}")


def pytest_terminal_summary(terminalreporter):
    """How long Snakemake takes to start as the tests start it: seconds more per start, over
    the suite's hundreds of starts, are minutes (see SLURM_CONF above)."""
    start = time.perf_counter()
    done = subprocess.run([str(BIN / "snakemake"), "--version"], capture_output=True,
                          env=tool_env())
    terminalreporter.write_line(f"snakemake --version took {time.perf_counter() - start:.1f} s "
                                f"(exit {done.returncode})")


def snakemake(workdir: Path, config: dict | None, *args: str, timeout: int = 900,
              env: dict[str, str] | None = None):
    """Run the project's workflow in workdir on config (written to workdir/config.yaml),
    with env added to the environment."""
    command = [str(BIN / "snakemake"), "--snakefile", str(REPO / "Snakefile"),
               "--directory", str(workdir)]
    if config is not None:
        (workdir / "config.yaml").write_text(yaml.safe_dump(config))
        command += ["--configfile", str(workdir / "config.yaml")]
    return subprocess.run(command + list(args), capture_output=True, text=True,
                          timeout=timeout, env=tool_env(**(env or {})))


@contextlib.contextmanager
def headless_chrome(binary: str):
    """A headless Chromium driven by Selenium through Debian's /usr/bin/chromedriver, with
    no network traffic of its own (this machine reaches no outside host)."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = binary
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})  # console messages
    # Its profile in a folder removed after it (left to itself, Chromium leaves an
    # org.chromium.Chromium.* folder in /tmp per browser).
    profile = tempfile.TemporaryDirectory(prefix="dlbench-chromium-")
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update",
                 "--window-size=1400,1000", f"--user-data-dir={profile.name}"):
        options.add_argument(flag)
    try:
        driver = webdriver.Chrome(options=options, service=Service("/usr/bin/chromedriver"))
        try:
            yield driver
        finally:
            driver.quit()
    finally:
        profile.cleanup()


PROFILE = ["--workflow-profile", str(REPO / "workflow" / "profiles" / "default")]


# What a workflow measures once per machine and keeps: the GEMM peak and the reference
# weights and outputs (results/peak, results/reference).
KEPT = ("peak", "reference")
# What `measured_once` makes of TINY_CONFIG's, as targets (`--until peak reference_output`
# made tiny-gpt2's outputs too, which no run starting from it reads; `--until` with files
# ran none of theirs): the peak of each device in its fp32 at 2 threads, both models'
# weights (tiny-gpt2's: the generation and train_step workflows) and tiny-bert's outputs
# at length 8 (batch 2: tests/test_grouping.py).
MEASURED_ONCE = ["results/peak/cpu_fp32_t2.json", "results/peak/gpu_fp32_t2.json",
                 "results/reference/tiny-gpt2/model.safetensors",
                 "results/reference/tiny-bert/b1_s8.npz", "results/reference/tiny-bert/b2_s8.npz"]


@pytest.fixture(scope="session")
def measured_once(shared_tmp: Path) -> Path:
    """The real workflow run once on TINY_CONFIG up to its peaks, both models' weights and
    the tiny-bert references that later runs read (MEASURED_ONCE): the results folder that
    the other end-to-end tests start from, as a user's second run on a machine does
    (measuring the peak's libraries and the references costs each run a minute or two on 2
    cores; the tests of those rules read this run). Once per test run: the first worker
    that needs it makes it, the other waits and reads it."""
    workdir = shared_tmp / "measured-once"
    with FileLock(shared_tmp / "measured-once.lock"):
        if not (workdir / "done").exists():
            shutil.rmtree(workdir, ignore_errors=True)
            workdir.mkdir()
            run = snakemake(workdir, TINY_CONFIG, *PROFILE, "--cores", "2",
                            *MEASURED_ONCE)
            assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
            (workdir / "done").touch()
    return workdir / "results"


def start_from(measured: Path, workdir: Path, kept=KEPT) -> Path:
    """workdir with the peak and references of `measured_once` copied in (modification
    times kept, so that Snakemake finds them up to date)."""
    for name in kept:
        shutil.copytree(measured / name, workdir / "results" / name, dirs_exist_ok=True)
    return workdir


# The shared workflow run's matrix: TINY_CONFIG with one model at batch 1 (the second batch
# size and model added nothing that its tests read but a minute of cells; a report of
# several models: tests/test_report_browser.py, and the generation workflow runs two), and
# ONNX Runtime's default recipe, so that every framework has a timed cell: 5 of 48.
TINY_RUN = tiny_config(models=["tiny-bert"], batch_sizes=[1],
                       optimizations=["eager", "graph", "ort-all"])


@pytest.fixture(scope="session")
def tiny_workflow(shared_tmp, measured_once) -> Path:
    """The real workflow run once on TINY_RUN, shared by the tests that read what it left
    (tests/test_workflow.py, the faults under load). --cores 4 on this 2-core machine: the
    measuring cells must still take turns for the device, which the faults test checks."""
    workdir = shared_tmp / "tiny-matrix"
    with FileLock(shared_tmp / "tiny-matrix.lock"):
        if not (workdir / "done").exists():
            shutil.rmtree(workdir, ignore_errors=True)
            start_from(measured_once, workdir)
            run = snakemake(workdir, TINY_RUN, *PROFILE, "--cores", "4")
            assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
            (workdir / "done").touch()
    return workdir


@pytest.fixture(scope="session")
def fixture_report(shared_tmp: Path):
    """The report of tests/test_report.py's fixture summary, rendered once per test run
    (papermill, ~7 s of CPU) for tests/test_report.py and tests/test_report_browser.py,
    which only read it: the first worker that needs it renders it, the other waits and
    reads it. (summary, the executed notebook, the HTML)."""
    from tests.test_report import fixture_summary, render_fixture, rendered_files

    folder = shared_tmp / "fixture-report"
    with FileLock(shared_tmp / "fixture-report.lock"):
        if not (folder / "done").exists():
            shutil.rmtree(folder, ignore_errors=True)
            folder.mkdir()
            render_fixture(folder)
            (folder / "done").touch()
    return (fixture_summary(), *rendered_files(folder))


@pytest.fixture
def chromium() -> str:
    path = shutil.which("chromium")
    if path is None:
        pytest.fail("chromium is not installed: run scripts/setup.sh --test")
    return path


# -- two tests at a time (pytest -n 2: pytest-xdist, see docs/testing.md) --------------------
# Most of an end-to-end test's time is processes starting, Snakemake planning and jobs
# waiting, so two workers share the 2 cores. A test marked `alone` decides a verdict from
# the machine's speed or load (a bottleneck, a significance, a ratio within the noise):
# nothing runs beside its call. Every other test holds a shared lock from its fixtures'
# set-up to their tear-down; an `alone` one sets up its fixtures under the shared lock too,
# then holds the exclusive lock for its call and tear-down. The turnstile, taken first,
# keeps new shared holders out while an `alone` test waits, so that it is not starved.
# Consecutive `alone` tests on a worker (a module's, in order) keep the exclusive lock from
# the first to the last: the machine is cleared for them once (waiting for the other
# worker's test in progress, which can be a workflow of minutes), not once per test.


def pytest_configure(config):
    """Each worker's cells take turns for the device among themselves only: the workers'
    measurements overlap (none of them is a speed under test, and an `alone` test has the
    machine to itself), so that one worker's long training cell does not keep the other's
    cells waiting for the host-wide device lock (dlbench.measure.devices)."""
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if worker and "DLBENCH_LOCK_DIR" not in os.environ:
        run = os.environ["PYTEST_XDIST_TESTRUNUID"]
        os.environ["DLBENCH_LOCK_DIR"] = str(_run_folder(run) / worker)


@pytest.fixture(scope="session")
def shared_tmp(tmp_path_factory) -> Path:
    """A folder shared by the workers of one test run (each worker's own one without them)."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


_held: dict[str, object] = {}  # the lock's open files while a test runs, and whether exclusive

# PyTorch's OpenMP threads (libgomp) spin at every barrier, ~300,000 turns, before they
# sleep. Two 2-thread cells of the two workers on 2 cores: a spinning thread holds the core
# that its partner needs, and tiny-bert's forward of 0.3 ms took 141-144 ms in 3 of 3 pairs
# of overlapping cells here (bench/overlapping_cells.py), both cores spinning (a planted
# 20-ms slowdown was lost in it). Beside another test, the threads sleep at once instead
# (OMP_WAIT_POLICY=PASSIVE: 0.45-1.26 ms overlapped); an `alone` test, and any test of a
# run with one worker, runs as users do, with the default (TensorFlow's and JAX's thread
# pools did not slow down overlapped).
WAIT_POLICY = "OMP_WAIT_POLICY"
_users_wait_policy = os.environ.get(WAIT_POLICY)


def _wait_policy(alone: bool) -> None:
    """The OpenMP wait policy of the subprocesses that a test starts."""
    if not alone and int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1")) > 1:
        os.environ[WAIT_POLICY] = "PASSIVE"
    elif _users_wait_policy is None:
        os.environ.pop(WAIT_POLICY, None)
    else:
        os.environ[WAIT_POLICY] = _users_wait_policy


def _is_alone(item) -> bool:
    return item is not None and item.get_closest_marker("alone") is not None


def _run_folder(run: str) -> Path:
    """The folder of a test run's locks (its workers' device locks, the `alone` lock)."""
    return Path(os.environ.get("TMPDIR", "/tmp")) / f"dlbench-tests-{run}"


def _lock_folder() -> Path | None:
    """The folder of this test run's machine locks; None in a run of one process, where
    nothing runs beside any test."""
    run = os.environ.get("PYTEST_XDIST_TESTRUNUID")
    if run is None:
        return None
    folder = _run_folder(run)
    folder.mkdir(exist_ok=True)
    return folder


@pytest.hookimpl(tryfirst=True)
def pytest_sessionfinish(session):
    """The controller of a run with workers removes the run's lock folder once they are
    done (before xdist tears them down), so that runs leave nothing behind in /tmp."""
    if os.environ.get("PYTEST_XDIST_WORKER"):
        return
    nodes = getattr(session.config.pluginmanager.getplugin("dsession"), "nodemanager", None)
    run = getattr(nodes, "testrunuid", None)
    if run:
        shutil.rmtree(_run_folder(run), ignore_errors=True)


def _take(folder: Path, exclusive: bool) -> None:
    """The machine, shared or exclusively, through the turnstile (see above)."""
    turnstile, lock = open(folder / "turnstile", "a"), open(folder / "alone", "a")
    fcntl.flock(turnstile, fcntl.LOCK_EX)
    fcntl.flock(lock, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
    fcntl.flock(turnstile, fcntl.LOCK_UN)
    _held.update(turnstile=turnstile, lock=lock, exclusive=exclusive)


def _release() -> None:
    for name in ("turnstile", "lock"):
        handle = _held.pop(name, None)  # none where an interrupt came while taking it
        if handle is not None:
            handle.close()  # closing the file releases its flock
    _held.clear()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    """The shared lock from the set-up of a test's fixtures to their tear-down; an `alone`
    test's call and tear-down hold the exclusive lock (pytest_runtest_call)."""
    folder = _lock_folder()
    if folder is None:
        yield
        return
    alone = _is_alone(item)
    # An `alone` test's fixtures are made beside other tests (a fixture of a minute would
    # keep the other worker waiting): what is timed alone is its call. Consecutive `alone`
    # tests keep the machine throughout.
    _wait_policy(alone and bool(_held.get("exclusive")))
    if not (alone and _held):
        _take(folder, exclusive=False)
    yield
    if alone and _is_alone(nextitem):
        return  # keep the exclusive lock for the next one
    _release()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item):
    folder = _lock_folder()
    if folder is not None and _is_alone(item) and not _held.get("exclusive"):
        _release()
        _take(folder, exclusive=True)
        _wait_policy(True)
    yield


# The order in which `--dist loadscope` hands out whole modules (the collection's, which
# pyproject.toml's --no-loadscope-reorder keeps; by default pytest-xdist sorts them by their
# number of tests). First the modules with `alone` tests, each module's `alone` tests first:
# an `alone` test waits for the other workers' tests in progress, and at the start that is
# another `alone` test or a short one, not a workflow of minutes (after the SLURM test's,
# one waited 130 s). Then roughly the longest first, so that the workers end together
# instead of one finishing a long module alone (the SLURM test's ~150 s are mostly waiting:
# its jobs run one after another, and the executor checks their status every ~12 s; it goes
# where the other worker still has long modules), down to the modules of ~10 s, so that
# the last module a worker takes is a short one (by name, the workers ended 40 s apart).
# test_compare has no `alone` test (its interleaved rounds cancel the load beside them), so
# it follows them among the long ones. Per-module times of fresh-clone runs:
# docs/measurements.md.
# test_supervisor first: it forks in the worker, which must not have imported JAX yet (some
# modules import it in-process; a fork of a process with JAX's threads can deadlock).
ORDER = ("test_supervisor", "test_bottleneck", "test_measurement", "test_flags_under_load",
         "test_faults", "test_compare", "test_grouping", "test_training", "test_optimizations",
         "test_onnxruntime",
         "test_fairness", "test_train_step_run", "test_generation", "test_pipelines",
         "test_presets", "test_slurm", "test_rounds_workflow", "test_train_step_workflow",
         "test_disk_full", "test_isolation", "test_generation_workflow", "test_cli",
         "test_peak", "test_report_browser",
         "test_report", "test_v1_results", "test_run_lock", "test_workflow",
         "test_dataset_damage", "test_registry", "test_scenarios", "test_adam", "test_setup",
         "test_cold_cache", "test_flops")


def pytest_collection_modifyitems(items):
    """Modules in ORDER's order, in each its `alone` tests first, so that the machine is
    cleared for them once per module (the exclusive lock is kept from one `alone` test to
    the next), not once per test."""
    def rank(item) -> tuple[int, str, bool]:
        name = item.module.__name__.rsplit(".", 1)[-1]
        return ORDER.index(name) if name in ORDER else len(ORDER), name, not _is_alone(item)

    items.sort(key=rank)  # stable: the other tests keep their order
