"""Where a command's CPU time goes, Python process by Python process: every process of a
virtual environment (the test suite's workers, Snakemake, each `dlbench run`, reference,
peak, export and report job, the tests' own `python -c` children) appends one line at its
exit: its command line, its own CPU time and that of the children it waited for, and the
test running (PYTEST_CURRENT_TEST). bench/suite_profile.py gives each test's CPU; this
says which kind of process spends it.

    .venv/bin/python bench/process_cpu.py install .venv /tmp/processes.jsonl
    CI=true .venv/bin/python -m pytest -ra -n 3 --dist loadscope    # or any command
    .venv/bin/python bench/process_cpu.py remove .venv
    .venv/bin/python bench/process_cpu.py report /tmp/processes.jsonl [--top 25]

`install` puts a sitecustomize.py into the environment's site-packages (refused where one
is there already); `remove` takes it out again. An interpreter whose standard library has a
sitecustomize of its own (Debian's /usr/lib/python3.X) finds that one first: the log then
stays empty. A process that ends by os._exit (a forked
child) or a signal writes no line: its CPU counts in its parent's children, once waited
for. The report gives, per kind of process, how many ran and their CPU with their waited
children's ("subtree", which counts a child's time in its parent's line too: compare
kinds, do not add them up), and per test the CPU of the processes the test started itself.
"""

import argparse
import collections
import json
import sys
from pathlib import Path

HOOK = '''# Written by bench/process_cpu.py install: one line per Python process at its exit.
import atexit, json, os, resource, sys


def _dlbench_process_cpu():
    try:
        own, waited = (resource.getrusage(w) for w in
                       (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN))
        line = {{"pid": os.getpid(), "ppid": os.getppid(), "argv": sys.argv[:8],
                "cpu": own.ru_utime + own.ru_stime,
                "children_cpu": waited.ru_utime + waited.ru_stime,
                "test": os.environ.get("PYTEST_CURRENT_TEST", "")}}
        with open({log!r}, "a") as out:
            out.write(json.dumps(line) + "\\n")
    except Exception:
        pass


atexit.register(_dlbench_process_cpu)
'''


def _site_packages(venv: Path) -> Path:
    found = sorted(venv.glob("lib/python3*/site-packages"))
    if not found:
        sys.exit(f"no site-packages under {venv}")
    return found[0]


def kind(argv: list[str]) -> str:
    """A process's kind from its command line: `dlbench run <scenario>`, `snakemake`, a
    module's name (dlbench.reference, the ONNX export), a test's `python -c`."""
    text = " ".join(argv)
    if "snakemake" in text:
        return "snakemake"
    if argv and argv[0].endswith("dlbench/__main__.py"):
        command = argv[1] if len(argv) > 1 else ""
        scenario = next((a.split("=", 1)[1] for a in argv if a.startswith("--scenario=")),
                        "inference" if command == "run" else "")
        return f"dlbench {command} {scenario}".strip()
    if "ipykernel" in text or "papermill" in text:
        return "report kernel"
    if argv and argv[0] == "-c":
        return "python -c"
    return Path(argv[0]).name if argv else "?"


def report(log: Path, top: int) -> None:
    rows = [json.loads(line) for line in log.read_text().splitlines() if line.strip()]
    pids = {r["pid"] for r in rows}
    subtree, count = collections.Counter(), collections.Counter()
    for row in rows:
        name = kind(row["argv"])
        subtree[name] += row["cpu"] + row["children_cpu"]
        count[name] += 1
    # A test's own processes: those whose parent wrote no line or a line without a test
    # (the pytest worker, which writes its line at the very end).
    by_test = collections.Counter()
    parents = {r["pid"]: r for r in rows}
    for row in rows:
        parent = parents.get(row["ppid"])
        if row["test"] and (parent is None or not parent["test"]):
            by_test[row["test"].rsplit(" (", 1)[0]] += row["cpu"] + row["children_cpu"]
    print(f"{len(rows)} processes ({len(pids)} pids)")
    print(f"{'subtree CPU s':>14} {'processes':>9} {'each':>6}  kind")
    for name, cpu in subtree.most_common(top):
        print(f"{cpu:14.1f} {count[name]:9d} {cpu / count[name]:6.2f}  {name}")
    print(f"\n{'CPU s':>8}  test (the processes it started, with their children)")
    for test, cpu in by_test.most_common(top):
        print(f"{cpu:8.1f}  {test}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    install = sub.add_parser("install")
    install.add_argument("venv", type=Path)
    install.add_argument("log", type=Path)
    remove = sub.add_parser("remove")
    remove.add_argument("venv", type=Path)
    shown = sub.add_parser("report")
    shown.add_argument("log", type=Path)
    shown.add_argument("--top", type=int, default=25)
    args = parser.parse_args(argv)
    if args.command == "report":
        report(args.log, args.top)
        return 0
    hook = _site_packages(args.venv) / "sitecustomize.py"
    if args.command == "install":
        if hook.exists():
            sys.exit(f"{hook} exists already: not replaced")
        hook.write_text(HOOK.format(log=str(args.log.resolve())))
        print(f"installed {hook}: every Python process of {args.venv} appends to {args.log}")
    else:
        if hook.exists() and hook.read_text().startswith("# Written by bench/process_cpu.py"):
            hook.unlink()
            print(f"removed {hook}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
