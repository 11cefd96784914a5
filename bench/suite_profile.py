"""Where the test suite's time goes: per test, its wall and CPU time (its own and its child
processes', as the OS accounts them when they are waited for), on which worker, when, and
how much of the machine's CPUs stood idle meanwhile.

    DLBENCH_SUITE_PROFILE=/tmp/suite.jsonl PYTHONPATH=bench \\
        .venv/bin/python -m pytest -p suite_profile -ra -n 2 --dist loadscope
    .venv/bin/python bench/suite_profile.py /tmp/suite.jsonl [--top 25]

The first command is the README's test command with this file loaded as a pytest plugin;
each worker appends one line per test. The second prints the modules by CPU time, the
slowest tests, and each worker's busy time and end: whether the suite is bound by its CPU
time (both workers busy to the end) or by how the tests are spread (one idle early); and
where the CPUs stood idle (the machine's idle time, /proc/stat, read at every test's start
and end: the share of the suite, and the windows with the most, with what ran in each).
Daemons a test leaves running (the SLURM test's) are not counted; a fixture's cost lands
on the test that first needs it.
"""

import argparse
import collections
import json
import os
import resource
import time

_started: dict[str, tuple[float, float, float]] = {}
_controller = False  # pytest-xdist's controlling process: it reports the workers' tests
WINDOW_S = 20  # the idle windows of the summary


def _idle_s() -> float:
    """The machine's idle CPU time since boot, every CPU's (idle and waiting for I/O)."""
    with open("/proc/stat") as stat:
        fields = stat.readline().split()  # cpu user nice system idle iowait …
    return (int(fields[4]) + int(fields[5])) / os.sysconf("SC_CLK_TCK")


def _cpu_s() -> float:
    own, children = (resource.getrusage(who) for who in
                     (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN))
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


# -- the plugin (pytest's hooks, in each worker) --------------------------------------------

def pytest_configure(config):
    global _controller
    _controller = ("PYTEST_XDIST_WORKER" not in os.environ
                   and getattr(config.option, "numprocesses", None) not in (None, 0))


def pytest_runtest_logstart(nodeid, location):
    _started[nodeid] = (time.time(), _cpu_s(), _idle_s())


def pytest_runtest_logfinish(nodeid, location):
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    if _controller or nodeid not in _started or "DLBENCH_SUITE_PROFILE" not in os.environ:
        return
    start, cpu, idle = _started.pop(nodeid)
    with open(os.environ["DLBENCH_SUITE_PROFILE"], "a") as out:
        out.write(json.dumps({"worker": worker, "test": nodeid, "start": start,
                              "end": time.time(), "cpu_s": _cpu_s() - cpu,
                              "idle_start_s": idle, "idle_end_s": _idle_s(),
                              "cpus": os.cpu_count()}) + "\n")


# -- the summary ------------------------------------------------------------------------------

def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("profile")
    parser.add_argument("--top", type=int, default=25)
    args = parser.parse_args()
    rows = [json.loads(line) for line in open(args.profile)]
    origin = min(r["start"] for r in rows)
    modules = collections.defaultdict(lambda: [0.0, 0.0])
    for r in rows:
        module = r["test"].split("::")[0]
        modules[module][0] += r["cpu_s"]
        modules[module][1] += r["end"] - r["start"]
    total = sum(cpu for cpu, _ in modules.values())
    print(f"{len(rows)} tests, {total:.0f} s of CPU; by module (CPU s, wall s):")
    for module, (cpu, wall) in sorted(modules.items(), key=lambda m: -m[1][0])[:args.top]:
        print(f"  {cpu:7.1f} {wall:7.1f}  {module}")
    print(f"the {args.top} slowest tests (CPU s, wall s):")
    for r in sorted(rows, key=lambda r: -(r["end"] - r["start"]))[:args.top]:
        print(f"  {r['cpu_s']:7.1f} {r['end'] - r['start']:7.1f}  {r['worker']} {r['test']}")
    print("workers (busy s, CPU s, ended at s):")
    for worker in sorted({r["worker"] for r in rows}):
        mine = [r for r in rows if r["worker"] == worker]
        print(f"  {worker}: {sum(r['end'] - r['start'] for r in mine):.0f}, "
              f"{sum(r['cpu_s'] for r in mine):.0f}, "
              f"{max(r['end'] for r in mine) - origin:.0f}")
    idle(rows, origin)


def idle(rows: list[dict], origin: float) -> None:
    """The machine's idle share over the suite and per window, from the idle counter read
    at every test's start and end (on either worker)."""
    import numpy as np

    if "idle_start_s" not in rows[0]:
        return  # a profile written before the counter was recorded
    stamps = sorted({(r[t], r[f"idle_{t}_s"]) for r in rows for t in ("start", "end")})
    times, counter = np.array(stamps).T
    cpus, span = rows[0]["cpus"], times[-1] - times[0]
    total = counter[-1] - counter[0]
    print(f"idle: {total:.0f} of {cpus * span:.0f} CPU-seconds while tests ran "
          f"({total / (cpus * span):.1%}); the windows of {WINDOW_S} s with the most:")
    edges = np.arange(times[0], times[-1], WINDOW_S)
    shares = np.diff(np.interp(np.append(edges, times[-1]), times, counter)) / (
        cpus * np.diff(np.append(edges, times[-1])))
    for k in np.argsort(-shares)[:8]:
        middle = edges[k] + WINDOW_S / 2
        running = [r["test"] for r in rows if r["start"] <= middle <= r["end"]]
        print(f"  {edges[k] - origin:6.0f} s {shares[k]:5.0%}  {' | '.join(running) or '-'}")


if __name__ == "__main__":
    main()
