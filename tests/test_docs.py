"""The documentation holds: README.md, docs/*.md and config/README.md link only to files and
headings that exist; the repository paths they name in backticks exist, and the results/,
report/ and logs/ paths are ones the workflow writes (dlbench.files.paths names every one);
the adding-a-framework page names every module a framework's folder needs, read from the
code; the README stays short and links every page; the timings measured to the second live
in one place, docs/measurements.md (and GPU runs in docs/what-has-run-where.md). Each check
returns what is wrong, and a planted fault in a temporary copy of a page shows that it can
fail."""

import inspect
import itertools
import re
import shutil
from pathlib import Path

import pytest

from dlbench.files import paths
from tests.conftest import REPO
from tests.test_registry import SCENARIOS  # the scenarios the conformance test checks

README_MAX_LINES = 150
PICTURE_MAX_BYTES = 150 * 1024
EXTENDING = "docs/extending.md"
FRAMEWORK_SECTION = "## Adding a framework"

FENCE = re.compile(r"^```.*?^```[^\n]*$", re.MULTILINE | re.DOTALL)
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")  # [text](target) and ![alt](target)
CODE_SPAN = re.compile(r"`([^`\n]+)`")
# Paths named in backticks that must exist in the repository (placeholders allowed)…
REPOSITORY_PREFIXES = ("config/", "src/", "workflow/", "scripts/", "bench/", "tests/",
                       "envs/", "docs/")
# …and those that a run generates (git-ignored): each must be one the workflow writes.
GENERATED_PREFIXES = ("results/", "report/", "logs/")
# Generated files named in the docs that dlbench.files.paths does not name ("*": any name),
# each with the file that makes it and what that file must say of it.
GENERATED_ELSEWHERE = {
    "report/provenance.html": ("Snakefile", "--report report/provenance.html"),
    # a training cell's py-spy flame graph, beside its record (training.profile)
    "results/runs/*.svg": ("src/dlbench/run/profiler.py", 'record.with_suffix(".svg")'),
    # ONNX Runtime's model, exported by its first cell beside the shared weights
    "results/reference/*/model-*.onnx": ("src/dlbench/frameworks/onnxruntime/export.py",
                                         'with_name(f"model-{attention}.onnx")'),
}
PLACEHOLDER = re.compile(r"<[^<>/]*>|…|\*")
# A time measured to the second or minute ("8 min 58 s", "1 h 33 min"): a dated
# measurement, kept in one place.
MEASURED = re.compile(r"\b\d+ (?:min \d+ s|h \d+ min)\b")
TIMINGS_HOME = ("docs/measurements.md", "docs/what-has-run-where.md")


def pages(root: Path = REPO) -> list[Path]:
    """README.md, docs/*.md and config/README.md."""
    return [root / "README.md", *sorted((root / "docs").glob("*.md")),
            root / "config" / "README.md"]


def shown(page: Path) -> str:
    """A page as its messages name it: README.md, docs/x.md, config/README.md."""
    return "/".join(page.parts[-2:]) if page.parent.name in ("docs", "config") else page.name


def prose(text: str) -> str:
    """The text without its fenced code blocks (their brackets are no links)."""
    return FENCE.sub("", text)


def slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    found: set[str] = set()
    for line in prose(page.read_text()).splitlines():
        match = re.match(r"#{1,6}\s+(.*?)\s*#*\s*$", line)
        if match:
            base = slug(match.group(1))
            name = base
            for n in itertools.count(1):
                if name not in found:
                    break
                name = f"{base}-{n}"
            found.add(name)
    return found


def link_problems(page: Path) -> list[str]:
    """Every relative link of `page` that points to no file, or to a heading its file lacks."""
    found = []
    for target in LINK.findall(prose(page.read_text())):
        if re.match(r"[a-z]+:", target):  # https:, mailto:
            continue
        file, _, anchor = target.partition("#")
        resolved = (page.parent / file).resolve() if file else page
        if not resolved.exists():
            found.append(f"{shown(page)}: {target}: no such file")
        elif anchor and resolved.suffix == ".md" and anchor not in anchors(resolved):
            found.append(f"{shown(page)}: {target}: no heading #{anchor} there")
    return found


def _spellings(token: str) -> list[str]:
    """`results/summary.{parquet,csv}` is two paths."""
    match = re.search(r"\{([^{}]*,[^{}]*)\}", token)
    if not match:
        return [token]
    return [s for choice in match.group(1).split(",")
            for s in _spellings(token[:match.start()] + choice + token[match.end():])]


def named_paths(page: Path) -> list[str]:
    """The paths under the checked prefixes named in `page`'s backticks and code blocks."""
    text = page.read_text()
    spans = CODE_SPAN.findall(prose(text)) + [b for b in FENCE.findall(text)]
    found = []
    for span in spans:
        for word in span.split():
            word = word.rpartition("=")[2].strip("'\"(),;:")
            if word.startswith(REPOSITORY_PREFIXES + GENERATED_PREFIXES):
                found += _spellings(word)
    return found


def generated_patterns() -> list[re.Pattern]:
    """What the workflow writes, from dlbench.files.paths (its constants, and each path
    function with a wildcard for each argument), with every folder above each."""
    wildcard = "\0"
    written = [v for v in vars(paths).values() if isinstance(v, str) and "/" in v]
    written += [paths.RESULTS, paths.LOGS]
    for attribute, function in vars(paths).items():
        if attribute.startswith("_") or not inspect.isfunction(function):
            continue
        parameters = inspect.signature(function).parameters.values()
        if any(p.annotation is Path for p in parameters):
            continue
        written.append(function(*[wildcard] * len(parameters)))
    written += [path.replace("*", wildcard) for path in GENERATED_ELSEWHERE]
    found = set()
    for path in written:
        parts = path.split("/")
        for n in range(1, len(parts) + 1):
            found.add("/".join(parts[:n]))
    return [re.compile("[^/]+".join(map(re.escape, p.split(wildcard)))) for p in sorted(found)]


def path_problems(page: Path, repo: Path = REPO) -> list[str]:
    """The paths named in `page` that are neither in `repo` nor written by the workflow
    (a placeholder such as <model>, * or … stands for any name)."""
    patterns = generated_patterns()
    found = []
    for path in named_paths(page):
        bare = path.rstrip("/")
        if path.startswith(GENERATED_PREFIXES):
            concrete = PLACEHOLDER.sub("x", bare)
            if not any(p.fullmatch(concrete) for p in patterns):
                found.append(f"{shown(page)}: {path}: not a path the workflow writes")
        elif not any(repo.glob(PLACEHOLDER.sub("*", bare))):
            found.append(f"{shown(page)}: {path}: not in the repository")
    return found


def framework_modules() -> list[str]:
    """The modules a framework's folder must have, read from the code: its package's
    `__init__`, every module that dlbench imports by name from each framework's package
    (`dlbench.frameworks.{framework}.backend`, …), and one per scenario that the
    conformance test checks (tests/test_registry.py's SCENARIOS)."""
    imported = set()
    for source in (REPO / "src" / "dlbench").rglob("*.py"):
        imported |= set(re.findall(r"dlbench\.frameworks\.\{[^}]+\}\.(\w+)", source.read_text()))
    return sorted({"__init__", *imported, *SCENARIOS})


def missing_framework_modules(page: Path) -> list[str]:
    """The modules that the page's adding-a-framework section does not name (as `x.py`)."""
    text = page.read_text()
    start = text.index(FRAMEWORK_SECTION)
    end = text.find("\n## ", start + len(FRAMEWORK_SECTION))
    section = text[start:end if end != -1 else len(text)]
    return [f"{m}.py" for m in framework_modules() if f"`{m}.py`" not in section]


def configs(root: Path = REPO) -> list[Path]:
    """The config files, whose comments a reader takes as documentation."""
    return sorted((root / "config").rglob("*.yaml"))


def timings_elsewhere(page: Path, root: Path = REPO) -> list[str]:
    """The measured times that a page holds outside TIMINGS_HOME, a time wrapped onto the
    next line (of prose or of comments) too, each at the line where it starts."""
    if str(page.relative_to(root)) in TIMINGS_HOME:
        return []
    lines = [line.strip().lstrip("#").strip() for line in page.read_text().splitlines()]
    return [f"{page.relative_to(root)}:{number}: {found.group()}"
            for number, (line, after) in enumerate(zip(lines, [*lines[1:], ""],
                                                       strict=True), 1)
            for found in MEASURED.finditer(f"{line} {after}") if found.start() < len(line)]


def readme_problems(root: Path = REPO) -> list[str]:
    """The README's length, and the pages it does not link."""
    readme = root / "README.md"
    found = []
    lines = len(readme.read_text().splitlines())
    if lines > README_MAX_LINES:
        found.append(f"README.md: {lines} lines, more than {README_MAX_LINES}")
    linked = {(root / t.partition("#")[0]).resolve() for t in LINK.findall(readme.read_text())}
    for page in pages(root)[1:]:
        if page.resolve() not in linked:
            found.append(f"README.md does not link {page.relative_to(root)}")
    return found


# -- the documentation as it is


@pytest.mark.parametrize("page", pages(), ids=lambda p: str(p.relative_to(REPO)))
def test_every_relative_link_points_to_a_file_and_heading_that_exist(page):
    assert link_problems(page) == []


@pytest.mark.parametrize("page", pages(), ids=lambda p: str(p.relative_to(REPO)))
def test_every_path_named_exists_or_is_written_by_the_workflow(page):
    assert path_problems(page) == []


def test_each_generated_path_named_elsewhere_is_made_where_it_says():
    for path, (maker, says) in GENERATED_ELSEWHERE.items():
        assert says in (REPO / maker).read_text(), (path, maker)


def test_the_adding_a_framework_page_names_every_module_a_framework_needs():
    assert missing_framework_modules(REPO / EXTENDING) == []


def test_the_module_list_is_read_from_the_code_and_is_what_the_frameworks_have():
    """Not blind: it holds each scenario the conformance test checks and what dlbench
    imports by name, and every registered framework's folder has every module (of the
    scenarios it measures)."""
    from dlbench.catalogue import frameworks

    modules = framework_modules()
    assert set(SCENARIOS) < set(modules) and len(modules) > len(SCENARIOS) + 1
    for framework in frameworks.REGISTERED:
        folder = REPO / "src" / "dlbench" / "frameworks" / framework
        needed = [m for m in modules
                  if m not in SCENARIOS or frameworks.get(framework).measures(m)]
        assert [m for m in needed if not (folder / f"{m}.py").is_file()] == [], framework


def test_the_readme_is_short_and_links_every_page():
    assert readme_problems() == []


def test_dated_timings_live_in_one_place():
    found = [problem for page in [*pages(), *configs()] for problem in timings_elsewhere(page)]
    assert found == []


def test_each_docs_page_says_first_what_it_is_for():
    for page in sorted((REPO / "docs").glob("*.md")):
        title, blank, purpose = page.read_text().splitlines()[:3]
        assert title.startswith("# ") and blank == "" and purpose and not purpose.startswith(
            ("#", "`", "|", "-")), page.name


def test_the_picture_of_the_answer_is_a_small_png():
    picture = REPO / "docs" / "answer.png"
    assert picture.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert picture.stat().st_size <= PICTURE_MAX_BYTES


# -- each check can fail: faults planted in a copy of the pages


@pytest.fixture
def copy(tmp_path) -> Path:
    """README.md, docs/ and config/README.md, copied as they are laid out here."""
    shutil.copy(REPO / "README.md", tmp_path / "README.md")
    shutil.copytree(REPO / "docs", tmp_path / "docs")
    (tmp_path / "config").mkdir()
    shutil.copy(REPO / "config" / "README.md", tmp_path / "config" / "README.md")
    return tmp_path


def _plant(page: Path, text: str) -> None:
    page.write_text(page.read_text() + "\n" + text + "\n")


def test_a_planted_broken_link_or_anchor_is_caught(copy):
    page = copy / "docs" / "compare.md"
    assert link_problems(page) == []
    _plant(page, "See [the keys](../config/README.md#no-such-key), [a page](gone.md) and "
                 "[this page](#nowhere); [fine](report.md#the-answer).")
    assert link_problems(page) == [
        "docs/compare.md: ../config/README.md#no-such-key: no heading #no-such-key there",
        "docs/compare.md: gone.md: no such file",
        "docs/compare.md: #nowhere: no heading #nowhere there"]


def test_a_planted_path_that_is_nowhere_is_caught(copy):
    page = copy / "docs" / "running.md"
    assert path_problems(page) == []
    _plant(page, "Run `--configfile config/presets/nope.yaml`, read `results/summary.json`, "
                 "`report/answer.pdf` and `src/dlbench/scenarios/__init__.py` (fine), "
                 "`results/runs/<cell>.json` (fine) and `src/dlbench/nowhere/<x>.py`.\n"
                 "```\nresults/peak/ results/gone/x\n```")
    assert path_problems(page) == [
        "docs/running.md: config/presets/nope.yaml: not in the repository",
        "docs/running.md: results/summary.json: not a path the workflow writes",
        "docs/running.md: report/answer.pdf: not a path the workflow writes",
        "docs/running.md: src/dlbench/nowhere/<x>.py: not in the repository",
        "docs/running.md: results/gone/x: not a path the workflow writes"]


def test_a_module_left_out_of_the_framework_page_is_caught(copy):
    page = copy / EXTENDING
    assert missing_framework_modules(page) == []
    page.write_text(page.read_text().replace("`generation.py`", "generation.py"))
    assert missing_framework_modules(page) == ["generation.py"]


def test_a_planted_timing_outside_measurements_is_caught(copy):
    measurements = copy / "docs" / "measurements.md"
    assert "min" in measurements.read_text() and timings_elsewhere(measurements, copy) == []
    page = copy / "docs" / "compare.md"
    _plant(page, "A comparison of 8 rounds took 12 min 5 s here (2026-11-30), one of 16\n"
                 "rounds 1 h 2 min, and a preset 9 min\n  42 s.")
    lines = len(page.read_text().splitlines())
    assert timings_elsewhere(page, copy) == [f"docs/compare.md:{lines - 2}: 12 min 5 s",
                                             f"docs/compare.md:{lines - 1}: 1 h 2 min",
                                             f"docs/compare.md:{lines - 1}: 9 min 42 s"]


def test_a_long_readme_or_an_unlinked_page_is_caught(copy):
    assert readme_problems(copy) == []
    (copy / "docs" / "new.md").write_text("# New\n\nA page no one links.\n")
    _plant(copy / "README.md", "\n" * README_MAX_LINES)
    assert readme_problems(copy) == [
        f"README.md: {len((copy / 'README.md').read_text().splitlines())} lines, more than "
        f"{README_MAX_LINES}",
        "README.md does not link docs/new.md"]
