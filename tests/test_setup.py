"""The set-up installs what the tests need from the system.

What the suite needs is read from the tests themselves and from the scripts they run: the
executables they call (`subprocess` argument lists, `shutil.which`, absolute paths such as
Selenium's /usr/bin/chromedriver; in shell scripts, the commands), and, where a test
measures a torch.compile optimization, the C++ compiler and Python headers that torch's
Inductor builds with. Each is found on this machine and mapped to its Debian package
(`dpkg-query -S`); that package must be declared in `scripts/setup.sh` (TEST_PACKAGES, as
its dry run prints it) and installed, unless it is part of every Debian system (Essential or
Priority required). Planted faults show that the check catches a package dropped from the
set-up and a test that starts calling something the set-up does not install, and a copy of
dpkg's database without a package shows that the set-up installs exactly what is missing.
"""

import ast
import functools
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from dlbench.catalogue.recipes import optimizations
from tests.conftest import REPO, headless_chrome

SETUP = REPO / "scripts" / "setup.sh"
TESTS = REPO / "tests"
# The PATH that root has on Debian: the scripts run as root.
SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
EXECUTABLE_PATH = re.compile(r"/(usr/)?(local/)?s?bin/[\w.+-]+")
SUBPROCESS = {"run", "Popen", "call", "check_call", "check_output"}
# Commands that run the command after them (their options and durations are skipped).
WRAPPERS = {"timeout", "runuser", "sudo", "env", "exec", "command", "nice", "nohup",
            "setsid", "stdbuf", "xargs"}
OPTIONS_WITH_VALUE = {"-s", "-k", "-u", "-g", "--signal", "--kill-after", "--user", "--group"}
# Shell words after which a command follows, and words that start no command.
LEADING = {"if", "then", "else", "elif", "do", "while", "until", "!", "time", "{", "}", "fi",
           "done", "esac"}
NOT_COMMANDS = {"for", "case", "select", "in", "function", "[[", "]]", "coproc"}
# What the reader must keep finding (else it has gone blind): the browser and its driver,
# the SLURM daemons and client commands, munge, and the compiler of torch.compile.
KNOWN = {"chromium", "chromedriver", "slurmctld", "slurmd", "munged", "sinfo", "squeue",
         "scontrol", "g++"}


@dataclass
class Needs:
    """What the tests need, each with where it is named ("tests/test_x.py:12")."""

    executables: dict[str, list[str]] = field(default_factory=dict)
    files: dict[str, list[str]] = field(default_factory=dict)  # headers, by absolute path

    def add(self, name: str, where: str, kind: str = "executables") -> None:
        places = getattr(self, kind).setdefault(name, [])
        if where not in places:
            places.append(where)


# -- reading the tests -------------------------------------------------------------------


def _first_word(node: ast.expr, names: dict[str, ast.expr], depth: int = 0) -> str | None:
    """The program of a subprocess call's first argument, where the source says it."""
    if depth > 5:
        return None
    match node:
        case ast.List(elts=[first, *_]) | ast.Tuple(elts=[first, *_]):
            if isinstance(first, ast.Starred):
                return _first_word(first.value, names, depth + 1)
            if isinstance(first, ast.Constant) and isinstance(first.value, str):
                return first.value
        case ast.BinOp(op=ast.Add(), left=left):
            return _first_word(left, names, depth + 1)
        case ast.Name(id=name) if name in names:
            return _first_word(names[name], names, depth + 1)
        case ast.Constant(value=str() as command) if command.split():
            return command.split()[0]
    return None


def _assignments(scope: ast.AST) -> dict[str, ast.expr]:
    return {node.targets[0].id: node.value for node in ast.walk(scope)
            if isinstance(node, ast.Assign) and len(node.targets) == 1
            and isinstance(node.targets[0], ast.Name)}


def _shown(path: Path) -> str:
    """tests/… or scripts/…, from the checkout (or planted copy) the file is in."""
    for parent in path.parents:
        if parent.name in ("tests", "scripts"):
            return path.relative_to(parent.parent).as_posix()
    return str(path)


def read_python(path: Path, needs: Needs) -> list[str]:
    """Add the executables a Python test file calls or names; return its string constants."""
    tree = ast.parse(path.read_text())
    module_names = _assignments(tree)
    scopes = {}  # call → the assignments of its function, then of the module
    for function in ast.walk(tree):
        if isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef):
            names = {**module_names, **_assignments(function)}
            for node in ast.walk(function):
                scopes[node] = names
    constants = []
    for node in ast.walk(tree):
        where = f"{_shown(path)}:{getattr(node, 'lineno', 0)}"
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            constants.append(node.value)
            if EXECUTABLE_PATH.fullmatch(node.value):
                needs.add(node.value, where)
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and isinstance(node.func.value, ast.Name) and node.args):
            continue
        owner, attribute = node.func.value.id, node.func.attr
        if owner == "subprocess" and attribute in SUBPROCESS:
            word = _first_word(node.args[0], scopes.get(node, module_names))
            if word:
                needs.add(word, where)
        elif owner == "shutil" and attribute == "which":
            argument = node.args[0]
            if isinstance(argument, ast.Constant) and isinstance(argument.value, str):
                needs.add(argument.value, where)
    return constants


# -- reading the shell scripts the tests run ---------------------------------------------


def _shell_code(text: str) -> str:
    """The script with comments, here-document bodies, arithmetic, ${…} and the literal text
    of quotes blanked out; command substitutions, also inside double quotes, are kept.
    Line continuations become \\v, so that line numbers still count."""
    out: list[str] = []
    modes: list[str] = ["code"]  # "code", "dq" (double quotes), "sub" (inside $( ))
    depth: list[int] = []  # open parentheses in each $( )
    heredocs: list[str] = []
    i, n = 0, len(text)
    while i < n:
        c, mode = text[i], modes[-1]
        if mode == "dq":
            if c == "\\":
                out.append("  ")
                i += 2
            elif c == '"':
                modes.pop()
                out.append("_ ")
                i += 1
            elif text.startswith("$(", i) and not text.startswith("$((", i):
                modes.append("sub")
                depth.append(0)
                out.append(" $( ")
                i += 2
            else:
                out.append("\n" if c == "\n" else " ")
                i += 1
            continue
        if text.startswith("\\\n", i):
            out.append(" \v")
            i += 2
        elif c == "\\":
            out.append("__")
            i += 2
        elif c == "'":
            end = text.find("'", i + 1)
            end = n if end < 0 else end
            out.append("_" + re.sub(r"[^\n]", " ", text[i + 1:end + 1]))
            i = end + 1
        elif c == '"':
            modes.append("dq")
            out.append(" ")
            i += 1
        elif c == "#" and (i == 0 or text[i - 1] in " \t\n;|&("):
            end = text.find("\n", i)
            i = n if end < 0 else end
        elif text.startswith("$((", i) or (text.startswith("((", i) and
                                            (i == 0 or text[i - 1] in " \t\n;&|")):
            end = text.find("))", i)
            end = n if end < 0 else end + 2
            out.append(" _ " + "\n" * text.count("\n", i, end))
            i = end
        elif text.startswith("$(", i):
            modes.append("sub")
            depth.append(0)
            out.append(" $( ")
            i += 2
        elif text.startswith("${", i):
            end = text.find("}", i)
            i = n if end < 0 else end + 1
            out.append("_")
        elif mode == "sub" and c in "()":
            if c == ")" and depth[-1] == 0:
                modes.pop()
                depth.pop()
                out.append(" ) ")
            else:
                depth[-1] += 1 if c == "(" else -1
                out.append(f" {c} ")
            i += 1
        elif (heredoc := re.match(r"<<-?\s*(['\"]?)([\w.-]+)\1", text[i:])):
            heredocs.append(heredoc.group(2))
            out.append(" ")
            i += heredoc.end()
        elif c == "\n" and heredocs:
            out.append("\n")
            i += 1
            for delimiter in heredocs:  # skip each body, up to its delimiter line
                while i < n:
                    end = text.find("\n", i)
                    end = n if end < 0 else end
                    line, i = text[i:end], end + 1
                    out.append("\n")
                    if line.strip() == delimiter:
                        break
            heredocs = []
        else:
            out.append(c)
            i += 1
    return "".join(out)


@functools.cache
def _bash_words() -> frozenset[str]:
    """Bash's builtins and keywords: commands that are no executable."""
    done = subprocess.run(["bash", "-c", "compgen -b; compgen -k"], capture_output=True,
                          text=True, check=True)
    return frozenset(done.stdout.split())


def _command_of(words: list[str]) -> list[str]:
    """The programs a simple command runs: its first word, and the one a wrapper runs."""
    while words and (words[0] in LEADING or re.fullmatch(r"\w+\+?=\S*", words[0])):
        words = words[1:]
    if not words or words[0] in NOT_COMMANDS:
        return []
    programs = [words[0]]
    rest = words[1:]
    while programs[-1] in WRAPPERS and rest:
        skip_value = False
        for position, word in enumerate(rest):
            if skip_value:
                skip_value = False
            elif word in OPTIONS_WITH_VALUE:
                skip_value = True
            elif not (word.startswith("-") or re.fullmatch(r"\d+(\.\d+)?[smhd]?", word)
                      or re.fullmatch(r"\w+=\S*", word)):
                programs.append(word)
                rest = rest[position + 1:]
                break
        else:
            break
    return programs


def read_shell(path: Path, needs: Needs) -> None:
    """Add the executables a shell script runs: each command's program, and absolute paths."""
    text = path.read_text()
    functions = set(re.findall(r"^\s*(?:function\s+)?([\w-]+)\s*\(\)", text, re.MULTILINE))
    code = _shell_code(text)
    # Array literals are data, not commands: NAME=(a b c), also over several lines.
    code = re.sub(r"(\w+\+?=)\([^()]*\)", lambda m: m[1] + "_" + "\n" * m[0].count("\n"),
                  code)
    lines, in_case = [], 0
    for line in code.split("\n"):  # drop the patterns of case branches: "idle)", "a | b)"
        first = line.split()[:1]
        in_case += first == ["case"]
        in_case -= first == ["esac"]
        lines.append(re.sub(r"^\s*[^\s$()][^$()\n]*\)", " ", line) if in_case else line)
    code = "\n".join(lines)
    separators = re.compile(r"\$\(|&&|\|\||;;|[;|&()\n`]|(?<!\S)[{}](?!\S)")
    start = 0
    for match in [*separators.finditer(code), None]:
        end = match.start() if match else len(code)
        segment, line = code[start:end], 1 + len(re.findall("[\n\v]", code[:start]))
        start = match.end() if match else end
        where = f"{_shown(path)}:{line}"
        for word in segment.split():
            if EXECUTABLE_PATH.fullmatch(word):
                needs.add(word, where)
        for program in _command_of(segment.split()):
            if program in _bash_words() or program in functions:
                continue
            if re.fullmatch(r"[A-Za-z][\w.+-]*", program) or EXECUTABLE_PATH.fullmatch(program):
                needs.add(program, where)


# -- torch.compile -----------------------------------------------------------------------


@functools.cache
def _inductor_needs() -> tuple[str, str]:
    """The C++ compiler torch.compile's Inductor uses on the CPU and the Python.h it
    includes, as this venv's torch finds them."""
    code = ("import sysconfig\n"
            "from torch._inductor.cpp_builder import get_cpp_compiler\n"
            "print(get_cpp_compiler())\n"
            "print(sysconfig.get_path('include'))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, f"torch finds no C++ compiler for Inductor:\n{done.stderr}"
    compiler, include = done.stdout.split()
    return compiler, str(Path(include) / "Python.h")


def read_tests(tests: list[Path], scripts: Path) -> Needs:
    """Everything the test files, and the scripts under `scripts` that they name, need
    (except the set-up itself: it installs, it is not what is installed)."""
    needs = Needs()
    constants: list[str] = []
    for path in tests:
        constants += read_python(path, needs)
    named = {Path(c).name for c in constants if c.endswith(".sh")}
    for path in sorted(scripts.rglob("*.sh")):
        if path.name in named and path != scripts / SETUP.name:
            read_shell(path, needs)
    compiled = sorted({c.removeprefix("--optimization=") for c in constants} & {
        name for name, spec in optimizations("inference").items()
        if spec.recipe.compile_mode is not None and spec.recipe.gpu_only is None})
    if compiled:
        compiler, header = _inductor_needs()
        where = f"torch.compile ({', '.join(compiled)}) in the tests"
        needs.add(compiler, where)
        needs.add(header, where, "files")
    return needs


# -- the system: dpkg, and the set-up's dry run ------------------------------------------


def _usr_merge_twins(path: str) -> list[str]:
    """The path, and its other name on a merged /usr (dpkg knows only one of them)."""
    for merged, short in (("/usr/bin/", "/bin/"), ("/usr/sbin/", "/sbin/"), ("/usr/lib/", "/lib/")):
        if path.startswith(merged):
            return [path, short + path.removeprefix(merged)]
        if path.startswith(short):
            return [path, merged + path.removeprefix(short)]
    return [path]


def packages_of(paths: list[str]) -> dict[str, str]:
    """path → the Debian package that installed it: the path as named first (a symlink such
    as /usr/bin/g++ belongs to g++), then what it points to (an alternative)."""
    candidates = {p: _usr_merge_twins(p) + _usr_merge_twins(os.path.realpath(p)) for p in paths}
    every = sorted({c for names in candidates.values() for c in names})
    done = subprocess.run(["dpkg-query", "-S", *every], capture_output=True, text=True)
    owner = {}
    for line in done.stdout.splitlines():
        package, _, path = line.partition(": ")
        if path and "," not in package and not line.startswith("diversion"):
            owner[path] = package.split(":")[0]  # without the architecture
    found = {}
    for path, names in candidates.items():
        package = next((owner[n] for n in names if n in owner), None)
        if package:
            found[path] = package
    return found


def package_status(packages: list[str]) -> dict[str, tuple[bool, bool]]:
    """package → (installed, part of every Debian system: Essential or Priority required)."""
    done = subprocess.run(
        ["dpkg-query", "-W", "-f=${Package} ${Essential} ${Priority} ${Status}\n", *packages],
        capture_output=True, text=True)
    status = {}
    for line in done.stdout.splitlines():
        name, essential, priority, *state = line.split()
        status[name] = (state[-2:] == ["ok", "installed"],
                        essential == "yes" or priority == "required")
    return status


def dry_run(setup: Path, **env: str) -> tuple[list[str], list[str]]:
    """(the packages the set-up declares for the tests, those it would install now)."""
    done = subprocess.run([str(setup), "--test", "--dry-run"], capture_output=True, text=True,
                          timeout=60, env={**os.environ, **env})
    assert done.returncode == 0, done.stdout + done.stderr
    declared = re.search(r"^setup: test packages \(Debian\): (.*)$", done.stdout, re.MULTILINE)
    planned = re.search(r"^setup: would install: (.*)$", done.stdout, re.MULTILINE)
    assert declared and planned, done.stdout
    would = planned.group(1).split()
    return declared.group(1).split(), [] if would == ["nothing"] else would


def problems(tests: list[Path], scripts: Path, setup: Path) -> list[str]:
    """Why the set-up does not install what the tests need, one line per need; [] if it does."""
    needs = read_tests(tests, scripts)
    declared, missing = dry_run(setup)
    found = []
    paths = {}  # need → the file on this machine
    for name, where in needs.executables.items():
        path = name if name.startswith("/") else shutil.which(name, path=SYSTEM_PATH)
        if path is None or not os.path.exists(path):
            found.append(f"{name} ({', '.join(where)}) is not on this machine: run "
                         f"{setup.name} --test, or if it is not from a package in its "
                         "TEST_PACKAGES, add the Debian package that provides it")
        else:
            paths[name] = path
    for name, where in needs.files.items():
        if os.path.exists(name):
            paths[name] = name
        else:
            found.append(f"{name} ({', '.join(where)}) is not on this machine")
    owners = packages_of(sorted(paths.values()))
    status = package_status(sorted(set(owners.values())))
    for name, path in sorted(paths.items()):
        where = ", ".join(needs.executables.get(name) or needs.files[name])
        package = owners.get(path)
        if package is None and name in needs.files and _comes_with_python(path):
            continue
        if package is None:
            found.append(f"{name} ({where}) is {path}, which no Debian package installed: "
                         "the set-up cannot install it on a fresh machine")
            continue
        installed, base = status.get(package, (False, False))
        if package not in declared and not base:
            found.append(f"{name} ({where}) comes from the Debian package {package}, which "
                         f"TEST_PACKAGES in {setup.name} does not list")
        elif not installed:
            found.append(f"{name} ({where}): its package {package} is not installed")
    found += [f"{package} is declared but not installed: run {setup.name} --test"
              for package in missing]
    return found


def _comes_with_python(path: str) -> bool:
    """A file of the interpreter the venv was made from, built outside Debian (pyenv's own
    Python.h, say): it comes with that interpreter, not from a package."""
    return Path(path).resolve().is_relative_to(Path(sys.base_prefix).resolve())


def _test_files() -> list[Path]:
    return sorted(TESTS.glob("*.py"))


# -- the tests ---------------------------------------------------------------------------


def test_the_reader_finds_what_the_suite_is_known_to_need():
    needs = read_tests(_test_files(), REPO / "scripts")
    this_file = Path(__file__).name
    named = {Path(name).name for name, where in needs.executables.items()
             if any(not w.startswith(f"tests/{this_file}:") for w in where)}
    assert KNOWN <= named, f"no longer found: {sorted(KNOWN - named)}"
    assert "/usr/bin/chromedriver" in needs.executables
    assert any(w.startswith("scripts/slurm/up.sh:") for w in needs.executables["slurmctld"])
    assert any(w.startswith("scripts/slurm/down.sh:") for w in needs.executables["squeue"])
    assert [name for name in needs.files if name.endswith("/Python.h")]


def test_setup_declares_and_installed_everything_the_tests_need():
    found = problems(_test_files(), REPO / "scripts", SETUP)
    assert not found, "\n" + "\n".join(found)


def test_a_package_dropped_from_the_setup_is_caught(tmp_path):
    """Planted: the driver's package removed from the set-up's list."""
    (tmp_path / "scripts").mkdir()
    for name in ("requirements.txt", "pyproject.toml"):  # what the set-up reads first
        shutil.copy(REPO / name, tmp_path / name)
    text = SETUP.read_text()
    assert "chromium chromium-driver  #" in text
    setup = tmp_path / "scripts" / "setup.sh"
    setup.write_text(text.replace("chromium chromium-driver  #", "chromium  #"))
    setup.chmod(0o755)
    assert "chromium-driver" not in dry_run(setup)[0]
    found = problems(_test_files(), REPO / "scripts", setup)
    assert len(found) == 1, found
    assert found[0].startswith("/usr/bin/chromedriver (tests/")
    assert "comes from the Debian package chromium-driver, which TEST_PACKAGES" in found[0]


def test_a_test_calling_what_the_setup_does_not_install_is_caught(tmp_path):
    """Planted: a test that calls a tool which is not installed and one from a package the
    set-up does not list, and a script it runs that calls another."""
    tests, scripts = tmp_path / "tests", tmp_path / "scripts"
    tests.mkdir()
    shutil.copytree(REPO / "scripts", scripts)
    (scripts / "extra.sh").write_text("#!/usr/bin/env bash\nset -e\n"
                                      "if true; then timeout 5 xmlstarlet-planted --help; fi\n")
    planted = tests / "test_planted.py"
    planted.write_text(
        "import shutil\nimport subprocess\n\n\n"
        "def test_planted():\n"
        "    assert shutil.which('dlbench-planted-tool')\n"
        "    command = ['git', 'status']\n"
        "    subprocess.run(command, check=True)\n"
        "    subprocess.run(['bash', 'extra.sh'], check=True)\n")
    found = problems([*_test_files(), planted], scripts, SETUP)
    assert any(p.startswith("dlbench-planted-tool (tests/test_planted.py:6) is not on this "
                            "machine") for p in found), found
    assert any(p.startswith("xmlstarlet-planted (scripts/extra.sh:3) is not on this machine")
               for p in found), found
    git = [p for p in found if p.startswith("git (tests/test_planted.py:8)")]
    # Not in the set-up's list: either not installed here, or from a package it does not name.
    assert git and ("is not on this machine" in git[0]
                    or "package git, which TEST_PACKAGES" in git[0]), found
    assert len(found) == 3, found  # the rest of the suite still passes


def _status_without(packages: list[str], admindir: Path) -> Path:
    """A copy of dpkg's database in which these packages were never installed."""
    (admindir / "updates").mkdir(parents=True)
    stanzas = Path("/var/lib/dpkg/status").read_text().split("\n\n")
    kept = [s for s in stanzas if not any(s.startswith(f"Package: {p}\n") for p in packages)]
    assert len(stanzas) - len(kept) == len(packages)
    (admindir / "status").write_text("\n\n".join(kept))
    return admindir


@pytest.mark.parametrize("removed", [["chromium-driver"], ["munge", "slurmd"],
                                     ["chromium", "chromium-driver"]],
                         ids=["browser-but-no-driver", "part-of-slurm", "no-browser"])
def test_setup_installs_exactly_what_is_missing(tmp_path, removed):
    """dpkg-query reads DPKG_ADMINDIR: the dry run sees a machine that lacks these."""
    declared, nothing = dry_run(SETUP)
    assert nothing == []
    admindir = _status_without(removed, tmp_path / "dpkg")
    declared_there, would = dry_run(SETUP, DPKG_ADMINDIR=str(admindir))
    assert declared_there == declared
    assert would == [p for p in declared if p in removed]


def test_the_browser_runs_through_its_driver(tmp_path, chromium):
    """The quick half of the report's browser test: Chromium, driven by Selenium through
    Debian's /usr/bin/chromedriver, opens a page."""
    page = tmp_path / "page.html"
    page.write_text("<title>dlbench</title><p id='text'>set up</p>")
    with headless_chrome(chromium) as driver:
        driver.get(page.as_uri())
        title, text = driver.title, driver.find_element("id", "text").text
    assert (title, text) == ("dlbench", "set up")
