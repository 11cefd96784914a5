"""A warm parent per framework and scenario: `dlbench run` jobs start from a process that
has already imported the framework, instead of importing it afresh (2-5 s of CPU a job on
2 cores: TensorFlow's import alone is ~4 s).

The first `dlbench run` of a framework and scenario starts a parent (`python -m dlbench
--warm-parent`) that imports what the job's measuring process would — the framework, the
scenario's operations — and dlbench's own job code; imports only: no model, no thread pool
started, no device or runtime touched. Then it waits on a Unix socket. Every `dlbench run`
of that framework and scenario (this one included) sends it its command line, working
folder, environment, umask and standard streams; the parent forks a fresh child that runs
the job as the command would have, and reports its exit status back. So every job is still
a fresh process of its own (its own memory, its own model, its measuring children forked
from it as before); what it shares with earlier jobs is the state of imported modules, as
a process forked after the imports. The job's records say so (`process.warm_parent`: the
parent's import seconds and how many jobs it had started before;
dlbench.run.cell.WARM_PARENT in the job).

A parent serves one framework, scenario, thread count, interpreter, dlbench source (files'
sizes and times) and environment (but the variables that name a test or a shell's state):
anything an import could read. It exits after IDLE_S without a job
(DLBENCH_WARM_PARENT_IDLE_S), and a stale one is never used. The client forwards SIGTERM
and SIGHUP to its job, and SIGINT to the job's process group (as a terminal's Ctrl-C
reaches every process of a command); if the client dies, the parent stops the job with
SIGTERM.

Off by default, on with DLBENCH_WARM_PARENT=1 (never under SLURM, where each job has its
own allocation and cgroup), and then only for frameworks whose declaration does not say why
not (`no_warm_parent`): forked jobs did not measure as jobs that import for themselves do.
TensorFlow's and JAX's BERT cells were 10% slower; PyTorch's medians agreed (1.002) but the
machine-noise probe beside its cells spread more on the idle machine than beside a
spinning process (tests/test_flags_under_load.py fails forked, passes not) — none of it
explained yet (config/README.md, "Warm parents").
"""

import fcntl
import hashlib
import json
import os
import select
import signal
import socket
import subprocess
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path

from dlbench.catalogue import frameworks
from dlbench.files import scratch
from dlbench.run import cell

# A parent without a job for this long exits: longer than the default run's turns of the
# other frameworks between two jobs of one (up to ~2.5 min on 2 cores).
IDLE_S = float(os.environ.get("DLBENCH_WARM_PARENT_IDLE_S", "180"))
START_TIMEOUT_S = 120.0  # how long a client waits for a parent's imports
# Variables that differ between the jobs of one run but that no import reads.
VOLATILE = ("PYTEST_CURRENT_TEST", "PYTEST_XDIST_WORKER", "_", "SHLVL", "OLDPWD", "PWD")
SERVE = "--warm-parent"  # `python -m dlbench --warm-parent SOCKET FRAMEWORK SCENARIO THREADS`
SWITCH = "DLBENCH_WARM_PARENT"  # "1": on; "all": also frameworks declared otherwise
_FORWARDED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
_MESSAGE = 1 << 20


def enabled(framework: str) -> bool:
    """Whether jobs of `framework` go to a warm parent: switched on (DLBENCH_WARM_PARENT=1),
    its declaration allows it (or the switch says "all", to measure it), not under SLURM."""
    switch = os.environ.get(SWITCH, "0")
    return (switch in ("1", "all") and "SLURM_JOB_ID" not in os.environ
            and (frameworks.get(framework).no_warm_parent is None or switch == "all"))


def folder() -> Path:
    """The user's parents' sockets, logs and locks (by uid: no user database needed)."""
    return scratch.shared() / f"dlbench-warm-parents-{os.getuid()}"


def identity(framework: str, scenario: str, threads: int) -> str:
    """What a parent's imports depend on, hashed: a client uses only a parent of its own."""
    package = Path(__file__).resolve().parent
    sources = sorted((str(p.relative_to(package)), p.stat().st_mtime_ns, p.stat().st_size)
                     for p in package.rglob("*.py"))
    environment = {k: v for k, v in os.environ.items() if k not in VOLATILE}
    described = json.dumps([framework, scenario, threads, sys.executable, sys.path, str(package),
                            sources, environment], sort_keys=True)
    return f"{framework}-{hashlib.sha256(described.encode()).hexdigest()[:16]}"


# --- the client: `dlbench run` ---------------------------------------------------------

def delegate(framework: str, scenario: str, threads: int, argv: list[str],
             process_start: float) -> int | None:
    """Run the job `argv` in a child of the framework's warm parent; its exit status, or
    None where no parent could take it (the caller then runs the job itself)."""
    if not enabled(framework) or cell.WARM_PARENT is not None:
        return None
    kind = [framework, scenario, str(threads)]
    name = identity(framework, scenario, threads)
    for _ in range(2):  # a parent that was just exiting (idle) took the job but not run it
        connection = _connect_or_start(name, kind)
        if connection is None:
            return None
        with connection:
            request = {"argv": argv, "argv0": sys.argv[0], "cwd": os.getcwd(),
                       "env": dict(os.environ), "umask": _umask(),
                       "process_start": process_start}
            sys.stdout.flush()
            sys.stderr.flush()
            socket.send_fds(connection, [json.dumps(request).encode()], [0, 1, 2])
            started = connection.recv(_MESSAGE)
            if not started:
                continue
            return _wait(connection)
    return None


def _wait(connection: socket.socket) -> int:
    """Forward signals to the job until the parent reports its exit status."""
    def forward(signum, _frame):
        connection.send(json.dumps({"signal": signum}).encode())

    previous = {signum: signal.signal(signum, forward) for signum in _FORWARDED}
    try:
        reply = connection.recv(_MESSAGE)
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    if not reply:
        print("dlbench run: the warm parent ended before the job did", file=sys.stderr)
        return 1
    return json.loads(reply)["exit"]


def _connect_or_start(name: str, kind: list[str]) -> socket.socket | None:
    home = folder()
    try:
        home.mkdir(mode=0o700, exist_ok=True)
        with open(home / "lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # one client starts a parent; others wait
            return _connect(home / f"{name}.sock") or _start(home, name, kind)
    except OSError:
        return None


def _connect(path: Path) -> socket.socket | None:
    connection = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    try:
        connection.connect(str(path))
        return connection
    except OSError:
        connection.close()
        return None


def _start(home: Path, name: str, kind: list[str]) -> socket.socket | None:
    path = home / f"{name}.sock"
    path.unlink(missing_ok=True)  # a parent that died without removing it
    with open(home / f"{name}.log", "w") as log:
        parent = subprocess.Popen(
            [sys.executable, "-m", "dlbench", SERVE, str(path), *kind],
            stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
            start_new_session=True, env=os.environ.copy())
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        connection = _connect(path)
        if connection is not None:
            return connection
        if parent.poll() is not None:
            return None  # its imports failed: the job's own will say why
        time.sleep(0.05)
    parent.kill()
    return None


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


# --- the parent ------------------------------------------------------------------------

def serve(argv: list[str], job: Callable[[list[str], float], int]) -> None:
    """`argv`: the socket's path, the framework, the scenario and the threads. Import the
    framework, then fork a child per job sent to the socket, which runs `job(command line,
    its start)` (the `dlbench` command: dlbench.cli.main), until idle."""
    path, framework, scenario, threads = Path(argv[0]), argv[1], argv[2], int(argv[3])
    started = time.time()
    _import(framework, scenario, threads)
    imports_s = round(time.time() - started, 3)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    staging = path.with_suffix(f".{os.getpid()}")
    listener.bind(str(staging))
    listener.listen(16)
    os.replace(staging, path)  # clients connect only once the imports are done
    wake_read, wake_write = os.pipe()
    os.set_blocking(wake_write, False)
    signal.set_wakeup_fd(wake_write)
    signal.signal(signal.SIGCHLD, lambda *_: None)  # wakes the poll through the pipe
    jobs: dict[socket.socket, int] = {}  # a client's connection → its job's pid
    orphans: set[int] = set()  # jobs whose client died: stopped, to be reaped
    forks = 0
    while True:
        ready = _ready([listener, wake_read, *jobs], None if jobs or orphans else IDLE_S)
        if not ready:  # idle: no new client can connect; take those already queued
            path.unlink(missing_ok=True)
            if not _ready([listener], 0):
                path.with_suffix(".log").unlink(missing_ok=True)
                return
            ready = [listener]
        for source in ready:
            if source is listener:
                connection, _ = listener.accept()
                message, fds, _, _ = socket.recv_fds(connection, _MESSAGE, 3)
                request = json.loads(message)
                parent = {"pid": os.getpid(), "imports_s": imports_s, "jobs_before": forks,
                          "log": str(path.with_suffix(".log"))}
                pid = os.fork()
                if pid == 0:
                    _job(job, request, parent, fds, [listener, *jobs, connection],
                         wake_read, wake_write)
                for fd in fds:
                    os.close(fd)
                forks += 1
                jobs[connection] = pid
                connection.send(json.dumps({"pid": pid}).encode())
            elif source is wake_read:
                os.read(wake_read, 4096)
                _reap(jobs, orphans)
            elif source in jobs:  # a client's signal, or its end
                _client_said(source, jobs, orphans)


def _ready(sources: list, timeout_s: float | None) -> list:
    """Those of `sources` (sockets, file descriptors) that can be read, or have ended.
    poll, not select: a parent that imported TensorFlow has file descriptors over 1024."""
    poll = select.poll()
    by_fd = {}
    for source in sources:
        fd = source if isinstance(source, int) else source.fileno()
        by_fd[fd] = source
        poll.register(fd, select.POLLIN)
    events = poll.poll(None if timeout_s is None else timeout_s * 1000)
    return [by_fd[fd] for fd, _ in events]


def _client_said(connection: socket.socket, jobs: dict, orphans: set) -> None:
    message = connection.recv(_MESSAGE)
    pid = jobs[connection]
    signum = json.loads(message)["signal"] if message else signal.SIGTERM
    try:  # Ctrl-C reaches the job's process group, as a terminal's does; others the job
        os.killpg(pid, signum) if signum == signal.SIGINT else os.kill(pid, signum)
    except ProcessLookupError:
        pass
    if not message:  # the client died: its job is stopped and reaped, no one to tell
        del jobs[connection]
        connection.close()
        orphans.add(pid)


def _reap(jobs: dict, orphans: set) -> None:
    for pid in list(orphans):
        if os.waitpid(pid, os.WNOHANG)[0]:
            orphans.discard(pid)
    for connection, pid in list(jobs.items()):
        done, status = os.waitpid(pid, os.WNOHANG)
        if not done:
            continue
        del jobs[connection]
        try:
            connection.send(json.dumps({"exit": os.waitstatus_to_exitcode(status)}).encode())
        except OSError:
            pass
        connection.close()


def _import(framework: str, scenario: str, threads: int) -> None:
    """What a job's measuring process imports before its first cell (dlbench.run.cell), and
    dlbench's job code: no more, so that a job's heap is a cold job's (a parent that also
    imported the other scenarios' modules and model classes slowed JAX's eager BERT by 9-13%:
    more objects for every garbage collection to walk)."""
    import importlib

    import dlbench.run.job  # noqa: F401
    from dlbench.frameworks import import_ops
    from dlbench.measure import env

    env.set_thread_variables(threads)  # the thread pools read them when they load
    frameworks.leave_out_unused_imports(framework)
    importlib.import_module(f"dlbench.frameworks.{framework}.backend")
    import_ops(framework, scenario)


def _job(job: Callable[[list[str], float], int], request: dict, parent: dict, fds: list[int],
         inherited: list, *pipe: int) -> None:
    """The forked child: become the client's `dlbench run` and exit with its status."""
    cell.WARM_PARENT = parent
    code = 1
    try:
        signal.set_wakeup_fd(-1)
        for signum in (signal.SIGCHLD, signal.SIGTERM, signal.SIGHUP):
            signal.signal(signum, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        os.setpgid(0, 0)  # the job and its measuring children: a group of their own
        for sock in inherited:
            sock.close()
        for fd in pipe:
            os.close(fd)
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
            os.close(fd)
        os.chdir(request["cwd"])
        os.umask(request["umask"])
        # The client's environment, as the parent's imports left it (they set variables that
        # the framework reads later, e.g. TensorFlow's XLA cache folder): the two differ only
        # in the VOLATILE variables, as the parent's identity says.
        for name in VOLATILE:
            os.environ.pop(name, None)
        os.environ.update(request["env"])
        sys.argv = [request["argv0"], *request["argv"]]
        code = job(request["argv"], request["process_start"])
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else int(exc.code is not None)
        if isinstance(exc.code, str):  # sys.exit("message"), as the interpreter prints it
            print(exc.code, file=sys.stderr)
    except BaseException:
        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)

