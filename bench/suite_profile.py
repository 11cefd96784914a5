"""Where the test suite's time goes: per test, its wall and CPU time (its own and its child
processes', as the OS accounts them when they are waited for), on which worker, when.

    DLBENCH_SUITE_PROFILE=/tmp/suite.jsonl PYTHONPATH=bench \\
        .venv/bin/python -m pytest -p suite_profile -ra -n 2 --dist loadscope
    .venv/bin/python bench/suite_profile.py /tmp/suite.jsonl [--top 25]

The first command is the README's test command with this file loaded as a pytest plugin;
each worker appends one line per test. The second prints the modules by CPU time, the
slowest tests, and each worker's busy time and end: whether the suite is bound by its CPU
time (both workers busy to the end) or by how the tests are spread (one idle early).
Daemons a test leaves running (the SLURM test's) are not counted; a fixture's cost lands
on the test that first needs it.
"""

import argparse
import collections
import json
import os
import resource
import time

_started: dict[str, tuple[float, float]] = {}


def _cpu_s() -> float:
    own, children = (resource.getrusage(who) for who in
                     (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN))
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


# -- the plugin (pytest's hooks, in each worker) --------------------------------------------

def pytest_runtest_logstart(nodeid, location):
    _started[nodeid] = (time.time(), _cpu_s())


def pytest_runtest_logfinish(nodeid, location):
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    if nodeid not in _started or "DLBENCH_SUITE_PROFILE" not in os.environ:
        return
    start, cpu = _started.pop(nodeid)
    with open(os.environ["DLBENCH_SUITE_PROFILE"], "a") as out:
        out.write(json.dumps({"worker": worker, "test": nodeid, "start": start,
                              "end": time.time(), "cpu_s": _cpu_s() - cpu}) + "\n")


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


if __name__ == "__main__":
    main()
