"""Results measured by dlbench before scenarios existed (result schema v1) are reused.

tests/data/v1_results holds what the v1 workflow (commit 4fb8f19) left after a tiny matrix,
per_cell and per_group: the result files, the shared reference files and Snakemake's
metadata of each (its record of the rule's command, parameters and inputs, which decides
whether a job must run again). The absolute paths in the metadata are placeholders, put
back for this checkout. The workflow of today must find nothing to measure there, and read
the v1 files into its summary.

The fixture's configs name the protocol their cells were measured with where a later
default differs from it: `target_ci: 0` (fixed durations, as v1 measured; adaptive stopping
is the default now) and `attention: sdpa` (PyTorch's SDPA, as v1 measured; the explicit
attention of every framework is the default now). A setting that keeps its v1 value stays
off the command line (dlbench.plan.settings), so the cells' command lines are those of v1.
"""

import os
import shutil

import pandas as pd
import pytest

from tests.conftest import BIN, REPO, snakemake, start_from

pytestmark = pytest.mark.slow  # end-to-end: `pytest -m "not slow"` skips it

FIXTURE = REPO / "tests" / "data" / "v1_results"


def restore(mode: str, workdir):
    """The fixture's v1 results in workdir, as the v1 workflow left them."""
    for name in ("runs", "metadata"):
        (workdir / ("results/runs" if name == "runs" else ".snakemake/metadata")).mkdir(
            parents=True)
    shutil.copytree(FIXTURE / "reference", workdir / "results" / "reference")
    for path in (FIXTURE / mode / "runs").iterdir():
        shutil.copy(path, workdir / "results" / "runs" / path.name)
    # The interpreter the workflow runs its jobs on: snakemake's own (its sys.executable),
    # which is not this one where .venv is a link to another checkout's environment.
    python = (BIN / "snakemake").read_text().splitlines()[0].removeprefix("#!").split()[0]
    for path in (FIXTURE / mode / "metadata").iterdir():
        text = path.read_text().replace("@SRC@", str(REPO / "src")).replace("@PYTHON@", python)
        (workdir / ".snakemake" / "metadata" / path.name).write_text(text)
    # A checkout sets every mtime alike: the inputs older than what was made from them.
    stamp = 1_700_000_000
    for i, relative in enumerate(["results/reference/tiny-bert/model.safetensors",
                                  "results/reference/tiny-bert/config.json",
                                  "results/reference/tiny-bert/b1_s8.npz"]):
        os.utime(workdir / relative, (stamp + i, stamp + i))
    for path in (workdir / "results" / "runs").iterdir():
        os.utime(path, (stamp + 10, stamp + 10))
    return (FIXTURE / mode / "config.yaml").read_text()


@pytest.mark.parametrize("mode", ["per_cell", "per_group"])
def test_v1_results_are_reused_not_measured_again(tmp_path, mode, measured_once):
    start_from(measured_once, tmp_path, kept=["peak"])  # the peak is new since v1
    config = restore(mode, tmp_path)
    (tmp_path / "config.yaml").write_text(config)
    profile = ["--workflow-profile", str(REPO / "workflow" / "profiles" / "default")]
    run = snakemake(tmp_path, None, "--configfile", str(tmp_path / "config.yaml"), *profile,
                    "--cores", "2")
    assert run.returncode == 0, run.stderr[-3000:]
    # The jobs the run ran, each announced as `rule <name>:` or `localrule <name>:` (read
    # here rather than from a dry run before it: the same plan, without a second start).
    ran = run.stdout + run.stderr
    for rule in ("measure_cell", "measure_group", "reference_weights", "reference_output"):
        assert f"rule {rule}:" not in ran, ran[-3000:]
    assert "rule aggregate:" in ran, ran[-3000:]  # only the summary and the report are missing
    summary = pd.read_parquet(tmp_path / "results" / "summary.parquet")
    measured = summary[summary["status"] == "ok"]
    assert sorted(measured["cell_id"]) == ["pytorch_tiny-bert_cpu_b1_s8_eager",
                                           "tensorflow_tiny-bert_cpu_b1_s8_eager",
                                           "tensorflow_tiny-bert_cpu_b1_s8_graph"]
    assert (measured["median_ms"] > 0).all()
    assert (tmp_path / "report" / "report.html").exists()
