"""End to end: the real `snakemake` on a tiny train_step matrix, through the shared weights
and reference outputs, to the summary and the report's train_step section."""

import pandas as pd
import pytest
from bs4 import BeautifulSoup

from dlbench.format import fmt_ms, fmt_percent
from dlbench.plan import config
from dlbench.plan.matrix import expand_cells
from dlbench.records import result
from tests import report_html
from tests.conftest import REPO, snakemake, start_from

pytestmark = pytest.mark.slow  # end-to-end: `pytest -m "not slow"` skips it

PROFILE = ["--workflow-profile", str(REPO / "workflow" / "profiles" / "default")]
CONFIG = {
    "frameworks": ["pytorch", "tensorflow"],
    "devices": ["cpu"],
    "train_step": {"models": ["tiny-gpt2"], "batch_sizes": [2], "sequence_lengths": [16],
                   "optimizers": ["sgd", "adam"],
                   "optimizations": ["eager", "graph", "fused", "channels-last"],
                   "learning_rate": {"adam": 0.002}},
    # Fixed, short timed loops (adaptive stopping off, as in the tiny matrix); SGD and Adam
    # in one process per framework and recipe (the scenario's groups, through the workflow).
    "measurement": {"warmup_iterations": 1, "min_duration_s": 0.1, "min_iterations": 5,
                    "target_ci": 0, "process": "per_group"},
}


@pytest.fixture(scope="module")
def workflow_run(tmp_path_factory, measured_once):
    workdir = start_from(measured_once, tmp_path_factory.mktemp("train-step-matrix"))
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
            continue
        assert record["status"] == "ok", (cell.id, record["reason"])
        assert record["step"]["learning_rate"] == (0.002 if cell.size("optimizer") == "adam"
                                                   else 0.01)
        assert record["settings"]["reference"].endswith("results/reference/tiny-gpt2/b2_s16.npz")
        assert record["correctness"]["within_tolerance"]
        measured += 1
    assert measured == 8  # PyTorch eager, fused; TensorFlow eager, graph; × SGD, Adam
    assert (workflow_run / "results/reference/tiny-gpt2/model.safetensors").is_file()


def test_summary_has_the_parts_and_the_reasons(workflow_run):
    summary = pd.read_parquet(workflow_run / "results" / "summary.parquet")
    ok = summary[summary["status"].eq("ok")]
    assert len(summary) == 2 * 2 * 4 and len(ok) == 8
    assert ok["breakdown_optimizer_share"].between(0, 1, inclusive="neither").all()
    assert (ok["breakdown_forward_backward_median_ms"] + ok["breakdown_optimizer_median_ms"]
            <= ok["median_ms"] * 1.2).all()  # medians of parts: about the step's
    assert list(ok["tokens_per_s"]) == pytest.approx(list(ok["samples_per_s"] * 16))
    assert (ok["loss_last"] < ok["loss_first"]).all()
    layout = summary[summary["optimization"].eq("channels-last")]
    assert layout["reason"].str.contains("changes the layout of convolutions; tiny-gpt2 has "
                                         "none").sum() == 2  # PyTorch's; TensorFlow's: N/A


def test_the_report_section_shows_steps_shares_and_the_answer(workflow_run):
    html = (workflow_run / "report" / "report.html").read_text()
    summary = pd.read_parquet(workflow_run / "results" / "summary.parquet")
    assert "Training steps: forward, loss, backward and the optimizer step" in \
        report_html.headings(html)
    table = next(rows for heading, rows in report_html.tables(html)
                 if heading and heading.startswith("Step time per framework"))
    header = table[0]
    rows = {(r[header.index("optimizer")], r[header.index("framework")],
             r[header.index("optimization")]): r for r in table[1:]}
    for cell in summary[summary["status"].eq("ok")].itertuples():
        name = {"pytorch": "PyTorch", "tensorflow": "TensorFlow"}[cell.framework]
        row = rows[cell.optimizer, name, cell.optimization]
        assert row[header.index("step ms")] == fmt_ms(cell.median_ms)
        assert row[header.index("optimizer share")] == fmt_percent(
            cell.breakdown_optimizer_share)
    assert "N/A (optimization 'channels-last' changes the layout" in html
    text = " ".join(BeautifulSoup(html, "html.parser").get_text(" ").split())
    assert "Head to head : PyTorch's eager Adam took" in text
    assert "TensorFlow's graph Adam" in text
    images = report_html.images(html)
    assert len(images) >= 1 and all(w > 100 and h > 100 for w, h in images)
