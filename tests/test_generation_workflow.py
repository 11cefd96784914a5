"""End to end: the real `snakemake` on a tiny generation matrix (tiny-gpt2 in PyTorch and
TensorFlow), through the shared weights and the reference's ids, to the summary, the report's
generation section and the answer-first table."""

import pandas as pd
import pytest

from dlbench.plan import config
from dlbench.plan.matrix import expand_cells
from dlbench.records import result
from tests import report_html
from tests.conftest import REPO, snakemake, start_from
from tests.test_generation import check_generates_the_reference_ids

pytestmark = pytest.mark.slow  # end-to-end: `pytest -m "not slow"` skips it

PROFILE = ["--workflow-profile", str(REPO / "workflow" / "profiles" / "default")]
CONFIG = {
    "frameworks": ["pytorch", "tensorflow"],
    "devices": ["cpu"],
    "generation": {"models": ["tiny-gpt2", "tiny-bert"], "batch_sizes": [2],
                   "prompt_lengths": [8], "new_tokens": [4],
                   "optimizations": {"pytorch": ["eager", "static-cache-sdpa"],
                                     "tensorflow": ["eager", "xla"]}},
    # Fixed, short timed loops (adaptive stopping off, as in the tiny matrix): under the
    # suite's load three of these cells ran its ±2% target's full 30 s.
    "measurement": {"warmup_iterations": 1, "min_duration_s": 0.1, "min_iterations": 5,
                    "target_ci": 0},
}


@pytest.fixture(scope="module")
def workflow_run(tmp_path_factory, measured_once):
    workdir = start_from(measured_once, tmp_path_factory.mktemp("generation-matrix"))
    run = snakemake(workdir, CONFIG, *PROFILE, "--cores", "2")
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    return workdir


def test_every_cell_is_measured_or_says_why(workflow_run):
    cells = expand_cells(config.validate(CONFIG))
    runs = workflow_run / "results" / "runs"
    assert sorted(p.stem for p in runs.glob("*.json")) == sorted(c.id for c in cells)
    measured = 0
    for cell in cells:
        record = result.read(runs / f"{cell.id}.json")
        reason = cell.unsupported_reason()
        if reason:
            assert (record["status"], record["reason"]) == ("unsupported", reason)
            assert "is not a decoder" in reason
            continue
        assert record["status"] == "ok", (cell.id, record["reason"])
        assert record["settings"]["reference"].endswith(
            "results/reference/tiny-gpt2/generation_b2_p8_n4.npz")
        assert record["correctness"]["within_tolerance"] is True
        measured += 1
    assert measured == 4


# The cells of tests/test_generation.py's one-cell-per-framework checks that this matrix
# runs (the same model, batch, prompt, new tokens and reference): checked on its records
# instead of being run again there.
@pytest.mark.parametrize(("framework", "optimization"), [
    ("pytorch", "eager"), ("pytorch", "static-cache-sdpa"), ("tensorflow", "xla")])
def test_its_cells_generate_the_reference_ids(workflow_run, framework, optimization):
    cell = f"generation_{framework}_tiny-gpt2_cpu_b2_p8_n4_{optimization}"
    record = result.read(workflow_run / "results" / "runs" / f"{cell}.json")
    check_generates_the_reference_ids(record, framework, optimization)


def test_the_summary_and_the_report_show_the_generation(workflow_run):
    summary = pd.read_parquet(workflow_run / "results" / "summary.parquet")
    ok = summary[summary["status"].eq("ok")]
    # One definition of the first token in every framework and recipe (the steps' stamps
    # beside it where the framework exposes them: PyTorch, TensorFlow eager).
    assert set(ok["generation_per_token_method"]) == {"whole_minus_first"}
    assert ok["generation_first_token_method"].nunique() == 1
    assert ok["generation_per_position_ms"].notna().sum() == 3  # PyTorch's two, TF eager
    assert list(ok["tokens_per_s"]) == pytest.approx(list(2 * 4 / (ok["median_ms"] / 1e3)))
    html = (workflow_run / "report" / "report.html").read_text()
    headings = report_html.headings(html)
    assert "Text generation: time to the first token and per output token" in headings
    assert "Time per output token against its position" in headings
    check = next(rows for heading, rows in report_html.tables(html)
                 if heading == "Token for token against the reference")
    assert len(check) == 1 + 4 and all("✓ equal" in row for row in check[1:])
    assert "Generation" in html  # the answer-first table has the scenario
    # The explicit attention in both frameworks (the default): PyTorch's SDPA recipe is
    # not set against TensorFlow's explicit attention, and nothing is unequal.
    assert "⚠ unequal attention:" not in html and "compare unequal attention" not in html
    # TensorFlow xla, the one compiled recipe: its prompt of 7 tokens after 8 (padded to 8)
    recompiled = next(rows for heading, rows in report_html.tables(html)
                      if heading == "Compilations across prompt lengths")
    assert len(recompiled) == 1 + 1 and "xla" in recompiled[1]
    assert "no" in recompiled[1]


def test_the_efficiency_section_has_the_generation_phases(workflow_run):
    html = (workflow_run / "report" / "report.html").read_text()
    summary = pd.read_parquet(workflow_run / "results" / "summary.parquet")
    timed = summary[summary["scenario"].eq("generation") & summary["status"].eq("ok")]
    from bs4 import BeautifulSoup

    captions = [c for c in BeautifulSoup(html, "html.parser").find_all("caption")
                if "The phases of a timed iteration" in c.get_text()]
    assert captions, "no table of the generation's phases"
    rows = [row.get_text(" ") for row in captions[0].find_parent("table").find_all("tr")][1:]
    # The prefill of each cell, and its decoding step where a time per token was resolved
    # (tiny-gpt2's XLA generation can take no longer than its first token timed apart:
    # then no decoding-step rate, never one from a negative time).
    resolved = timed["generation_per_token_ms"].notna()
    assert (timed.loc[resolved, "generation_per_token_ms"] > 0).all()
    assert len(rows) == len(timed) + resolved.sum()
    assert sum("prefill (first token)" in row for row in rows) == len(timed)
