"""Graphs for every compiled recipe: a real compile-step cell of the train_step scenario
records dynamo's graphs, graph breaks and recompilations, and is flagged `not one graph`
where dynamo split the step (as inference cells are)."""

import subprocess
import sys

import pytest

from dlbench.records import result
from tests.conftest import tool_env

pytestmark = pytest.mark.slow


def run_cell(out, optimization: str) -> dict:
    """A PyTorch train_step cell of tiny-bert (its own seeded weights: no reference needed
    to count graphs)."""
    command = [sys.executable, "-m", "dlbench", "run", "--scenario=train_step",
               "--framework=pytorch", "--model=tiny-bert", "--device=cpu", "--batch=2",
               "--seqlen=16", "--optimizer=adam", f"--optimization={optimization}",
               "--warmup-iterations=1", "--min-duration-s=0.1", "--min-iterations=5",
               f"--out={out}"]
    run = subprocess.run(command, env=tool_env(), capture_output=True, text=True, timeout=900)
    assert run.returncode == 0, run.stderr[-3000:]
    return result.read(out)  # validated against the schema, `compilation` included


def test_a_compile_step_cell_records_its_graphs_and_breaks(tmp_path):
    record = run_cell(tmp_path / "step.json", "compile-step")
    assert record["status"] == "ok", record["reason"]
    graphs = record["compilation"]
    assert graphs["graphs"] >= 1
    # One program would be one graph and no break; what dynamo made is flagged if not.
    one = graphs["graphs"] == 1 and not graphs["graph_breaks"] and not graphs["recompiles"]
    assert record["flags"]["not_one_graph"] == (not one)
    assert len(graphs["break_reasons"]) <= 5  # the first reasons, not all
    if graphs["graph_breaks"]:
        assert graphs["break_reasons"]  # each break says why (e.g. Tensor.backward())
    eager = run_cell(tmp_path / "eager.json", "eager")
    assert eager["compilation"] is None and not eager["flags"]["not_one_graph"]
