"""A flame graph of a cell's timed steady state, recorded from outside by py-spy.

The measuring child marks the start and the end of its timed loop with marker files beside
its record; the supervisor starts `py-spy record` on the child when the loop starts and
stops it when the loop ends, so the profile holds the steady state only. py-spy runs with
`--nonblocking` (its default mode stops the process at every sample, which can slow a
PyTorch process several-fold) and `--subprocesses` (input-pipeline workers). The SVG lies
beside the cell's result. Where py-spy is missing or may not attach, the cell still runs
and its record says why there is no profile.
"""

import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

# The phases of a cell (dlbench.measure.timing.PhaseClock) between which it is profiled.
LOOP_START, LOOP_END = "first_timed_iteration_s", "timed_loop_end_s"
RATE_HZ = 100


def marker(record: Path, phase: str) -> Path:
    """The file the child writes when it reaches `phase` of the cell whose record is
    `record`."""
    return record.with_name(f".{record.name}.{phase}")


def svg_path(record: Path) -> Path:
    return record.with_suffix(".svg")


# Where py-spy is, if not beside this Python or on PATH.
PROGRAM_VARIABLE = "DLBENCH_PY_SPY"


def _py_spy() -> str | None:
    if os.environ.get(PROGRAM_VARIABLE):
        chosen = os.environ[PROGRAM_VARIABLE]
        return chosen if Path(chosen).is_file() else None
    beside = Path(sys.executable).with_name("py-spy")
    return str(beside) if beside.exists() else shutil.which("py-spy")


class Profiler:
    """One py-spy recording of a process tree, from `start` to `stop`."""

    def __init__(self, pid: int, record: Path):
        self.pid, self.svg = pid, svg_path(record)
        self.log = self.svg.with_suffix(".py-spy.log")
        self.process: subprocess.Popen | None = None

    def start(self) -> dict | None:
        """Start recording; the profile's failure (to be recorded) if it cannot start."""
        program = _py_spy()
        if program is None:
            return {"status": "unavailable", "reason": "py-spy is not installed (pip install "
                    "py-spy, or scripts/setup.sh)"}
        self.svg.unlink(missing_ok=True)
        with open(self.log, "w") as log:
            self.process = subprocess.Popen(
                [program, "record", "--pid", str(self.pid), "--subprocesses", "--nonblocking",
                 "--rate", str(RATE_HZ), "--format", "flamegraph", "--output", str(self.svg)],
                stdout=log, stderr=subprocess.STDOUT)
        return None

    def stop(self) -> dict:
        """Stop recording (py-spy writes its SVG on SIGINT); what the record keeps."""
        if self.process is None:
            return {"status": "failed", "reason": "py-spy was not started"}
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
        try:
            self.process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        output = self.log.read_text(errors="replace").strip() if self.log.exists() else ""
        self.log.unlink(missing_ok=True)
        if self.svg.exists() and self.svg.stat().st_size > 0:
            return {"status": "ok", "svg": str(self.svg), "tool": "py-spy record "
                    f"--nonblocking --subprocesses --rate {RATE_HZ}"}
        why = output.splitlines()[-1] if output else f"exit status {self.process.returncode}"
        if "ptrace" in output.lower() or "permission" in output.lower():
            why += (" — py-spy may not attach to the process (ptrace permission: run as the "
                    "same user with kernel.yama.ptrace_scope 0, or with CAP_SYS_PTRACE)")
        return {"status": "failed", "reason": f"py-spy wrote no profile: {why}"}


class Watch:
    """The supervisor's side: profile each job's timed loop as the child marks it.

    records: each job's result; written: the file the child writes it to first, beside
    which it marks its phases."""

    def __init__(self, pid: int, records: list[Path], written: list[Path]):
        self.pid, self.records, self.written = pid, records, written
        self.results: dict[int, dict] = {}
        self._running: tuple[int, Profiler] | None = None

    def poll(self) -> None:
        """Start or stop recording as the markers of the jobs appear."""
        for index, (record, written) in enumerate(zip(self.records, self.written, strict=True)):
            if index in self.results:
                continue
            if self._running is None and marker(written, LOOP_START).exists():
                profiler = Profiler(self.pid, record)
                failure = profiler.start()
                if failure:
                    self.results[index] = failure
                else:
                    self._running = (index, profiler)
            if self._running and self._running[0] == index and marker(written,
                                                                      LOOP_END).exists():
                self.results[index] = self._running[1].stop()
                self._running = None

    def close(self) -> dict[int, dict]:
        """Stop what still records (the child died, or was stopped); each job's result."""
        if self._running:
            index, profiler = self._running
            self.results[index] = profiler.stop()
            self._running = None
        for written in self.written:
            for phase in (LOOP_START, LOOP_END):
                marker(written, phase).unlink(missing_ok=True)
        return self.results
