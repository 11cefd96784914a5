"""A scenario is one module: a throwaway one, written here in a few lines and loaded as a
plugin, runs through the real workflow to the summary and the report, without any change
to the runner, the supervisor or the rules."""

import textwrap

import pandas as pd
import pytest

from dlbench import scenarios
from tests.conftest import REPO, snakemake, start_from

PLUGIN = textwrap.dedent('''
    import time

    from dlbench.measure.timing import steady_state
    from dlbench.scenarios import Axis, Scenario, register


    class Sleep(Scenario):
        name = "sleep"
        description = "time.sleep of a given length (a test of the scenario registry)"
        axes = (Axis("ms", "durations_ms", "d", "milliseconds to sleep"),)

        def models(self):
            return ["none"]

        def optimizations(self):
            return ["plain"]

        def measure(self, backend, cell, settings, clock, inputs):
            seconds = cell.size("ms") / 1e3
            return {"timing": steady_state(lambda: time.sleep(seconds), backend.synchronize,
                                           settings, clock)}


    register(Sleep())
''')


@pytest.fixture(scope="module")
def plugin(tmp_path_factory):
    path = tmp_path_factory.mktemp("plugin") / "sleep_scenario.py"
    path.write_text(PLUGIN)
    return {scenarios.PLUGINS_VARIABLE: str(path)}


@pytest.mark.slow
def test_a_new_scenario_runs_through_the_workflow(tmp_path, plugin, measured_once):
    start_from(measured_once, tmp_path, kept=["peak"])
    config = {"frameworks": ["pytorch"], "devices": ["cpu"],
              "sleep": {"models": ["none"], "optimizations": ["plain"],
                        "durations_ms": [2, 20]},
              "measurement": {"warmup_iterations": 1, "min_duration_s": 0.2,
                              "min_iterations": 5}}
    profile = ["--workflow-profile", str(REPO / "workflow" / "profiles" / "default")]
    run = snakemake(tmp_path, config, *profile, "--cores", "2", env=plugin)
    assert run.returncode == 0, run.stderr[-3000:]
    summary = pd.read_parquet(tmp_path / "results" / "summary.parquet").set_index("cell_id")
    assert list(summary.index) == ["sleep_pytorch_none_cpu_d2_plain",
                                   "sleep_pytorch_none_cpu_d20_plain"]
    assert (summary["status"] == "ok").all() and (summary["scenario"] == "sleep").all()
    assert list(summary["ms"]) == [2, 20]
    # A sleep takes at least its length, and not much more on an idle machine.
    for cell, ms in summary["ms"].items():
        assert ms <= summary.loc[cell, "median_ms"] < ms + 15
    # The report gives the scenario the generic section: a row for each of its cells. (Cell
    # ids appear elsewhere only where a cell is flagged, which depends on the machine's load.)
    html = (tmp_path / "report" / "report.html").read_text()
    assert "Scenario <code>sleep</code>" in html
    assert "The 2 cells of the sleep scenario" in html

