"""A result from elsewhere — another machine, or another dlbench version, copied into
results/runs/ — is named in the summary and left out of the comparisons, unless
report.mix_foreign; a run whose records all come from one machine flags nothing."""

import json

import pandas as pd
import pytest

import dlbench
from dlbench.analysis import headline, ratio, resultset
from dlbench.analysis.compare import compare
from dlbench.analysis.status import from_elsewhere
from dlbench.analysis.summary import derive, timed
from dlbench.plan import settings
from dlbench.records import aggregate, origin
from dlbench.records.record import finish, new_record
from dlbench.scenarios.cell import Cell
from tests.conftest import snakemake, tiny_config
from tests.test_analysis import cell

OTHER_MACHINE = {"hardware_fingerprint": "0ther0ther000", "cpu_model": "Other CPU 9000",
                 "logical_cpus": 64, "hostname": "elsewhere"}


@pytest.fixture
def runs(tmp_path):
    """Four real records of this machine and this dlbench (cells that do not run here, so
    that each is written in a moment), as results/runs/ holds them."""
    folder = tmp_path / "runs"
    for framework in ("pytorch", "tensorflow"):
        for batch in (1, 2):
            one = Cell("inference", framework, "tiny-bert", "cpu", "eager",
                       (("batch", batch), ("seqlen", 8)))
            record = new_record(one, settings.defaults())
            record["reason"] = "not measured here"
            finish(record, folder / f"{one.id}.json")
    return folder


def copy_in(path, **environment):
    """The record at path as another machine or dlbench version would have written it."""
    record = json.loads(path.read_text())
    record["environment"].update(environment)
    path.write_text(json.dumps(record))


def test_records_of_one_machine_flag_nothing(runs, tmp_path, capsys):
    aggregate.aggregate(sorted(runs.glob("*.json")), tmp_path / "s.parquet", tmp_path / "s.csv")
    summary = pd.read_parquet(tmp_path / "s.parquet")
    assert summary[origin.FOREIGN].isna().all() and not summary[origin.LEFT_OUT].any()
    assert from_elsewhere(summary).empty
    assert len(derive(summary)) == 4
    assert "elsewhere" not in capsys.readouterr().out


def test_a_copied_record_is_named_and_left_out(runs, tmp_path, capsys):
    files = sorted(runs.glob("*.json"))
    copy_in(files[0], **OTHER_MACHINE)
    copy_in(files[1], dlbench="0.0.9")
    aggregate.aggregate(files, tmp_path / "s.parquet", tmp_path / "s.csv")
    out = capsys.readouterr().out
    summary = pd.read_csv(tmp_path / "s.csv")
    listed = from_elsewhere(summary)
    assert listed["cell_id"].tolist() == [files[0].stem, files[1].stem]
    assert listed["compared"].tolist() == ["no", "no"]
    assert listed["from"][0].startswith("another machine (Other CPU 9000, 64 CPUs; the "
                                        "run's: ")
    assert listed["from"][1] == (f"another dlbench version (0.0.9; the run's: "
                                 f"{dlbench.__version__})")
    assert "2 cells from elsewhere, left out of the comparisons" in out
    assert files[0].stem in out and "Other CPU 9000" in out
    assert sorted(derive(summary)["cell_id"]) == [f.stem for f in files[2:]]

    aggregate.aggregate(files, tmp_path / "s.parquet", tmp_path / "s.csv", mix_foreign=True)
    summary = pd.read_parquet(tmp_path / "s.parquet")
    assert from_elsewhere(summary)["compared"].tolist() == ["yes", "yes"]
    assert len(derive(summary)) == 4
    assert "2 cells from elsewhere, compared with the others" in capsys.readouterr().out


def test_one_machine_is_one_whatever_a_job_placement_changes():
    """A cluster's identical nodes, a cpuset's usable CPUs (the hardware fingerprint
    differs), a CPU job that sees no GPU: one machine."""
    rows = [{"cell_id": f"c{i}", "env_cpu_model": "Xeon", "env_logical_cpus": 64,
             "env_hostname": f"node{i}", "env_hardware_fingerprint": f"f{i}",
             "env_usable_cpus": 4 * (i + 1), "device": "gpu" if i else "cpu",
             "env_gpu": "H100" if i else None, "env_dlbench": "0.1.0",
             "started_at": f"2026-01-01T00:00:0{i}"} for i in range(3)]
    assert origin.mark(pd.DataFrame(rows))[origin.FOREIGN].isna().all()


def test_a_gpu_cell_on_another_gpu_is_from_elsewhere():
    rows = [{"cell_id": f"c{i}", "env_cpu_model": "Xeon", "device": "gpu", "env_gpu": gpu}
            for i, gpu in enumerate(["H100", "H100", "A100"])]
    assert origin.mark(pd.DataFrame(rows))[origin.FOREIGN].tolist() == [
        None, None, "another GPU (A100; the run's: H100)"]


def test_the_run_is_its_majority_and_on_a_tie_its_first_cells():
    def machines(*names):
        return pd.DataFrame([{"cell_id": f"c{i}", "env_cpu_model": name,
                              "started_at": f"2026-01-01T00:00:0{i}"}
                             for i, name in enumerate(names)])

    flagged = origin.mark(machines("a", "b", "b"))[origin.FOREIGN].notna().tolist()
    assert flagged == [True, False, False]
    flagged = origin.mark(machines("a", "b"))[origin.FOREIGN].notna().tolist()
    assert flagged == [False, True]
    # A cell that recorded no machine (an older result) is not called foreign.
    assert origin.mark(machines(None, "a"))[origin.FOREIGN].isna().all()


def test_a_foreign_cell_takes_no_part_in_the_answer_or_the_ratios():
    """TensorFlow's cell, from a faster machine, would win; left out, PyTorch is alone."""
    here = {"env_cpu_model": "here", "env_dlbench": "0.1.0"}
    rows = [cell("pytorch", "eager", 10.0, median_ci95_ms_low=9.9, median_ci95_ms_high=10.1,
                 **here, started_at="2026-01-01T00:00:00"),
            cell("pytorch", "eager", 20.0, batch=2, median_ci95_ms_low=19.8,
                 median_ci95_ms_high=20.2, **here, started_at="2026-01-01T00:00:01"),
            cell("tensorflow", "eager", 5.0, median_ci95_ms_low=4.9, median_ci95_ms_high=5.1,
                 **here | {"env_cpu_model": "faster"},
                 started_at="2026-01-01T00:00:02")]
    apart = derive(origin.mark(pd.DataFrame(rows)))
    assert set(apart["framework"]) == {"pytorch"}
    assert headline.winners(apart, False)["inference"]["fastest"].tolist() == [
        "PyTorch eager", "PyTorch eager"]
    assert ratio.against_fastest(timed(apart)).empty

    mixed = derive(origin.mark(pd.DataFrame(rows), mix=True))
    assert headline.winners(mixed, False)["inference"]["fastest"].tolist()[0] == (
        "TensorFlow eager")
    assert set(ratio.against_fastest(timed(mixed))["framework"]) == {"pytorch", "tensorflow"}


def test_dlbench_compare_names_a_sets_cells_from_elsewhere(runs, tmp_path):
    """A result set (what `dlbench compare` reads) leaves them out too, and says which; a
    summary read back from its records keeps the workflow's choice (report.mix_foreign)."""
    files = sorted(runs.glob("*.json"))
    copy_in(files[0], **OTHER_MACHINE)
    loaded = resultset.load(runs)
    assert loaded.elsewhere["cell_id"].tolist() == [files[0].stem]
    assert files[0].stem not in set(loaded.summary["cell_id"])
    compared = compare(loaded, resultset.load(runs))
    assert compared.elsewhere[["set", "cell_id"]].values.tolist() == [
        ["baseline", files[0].stem], ["new", files[0].stem]]

    results = tmp_path / "results"  # as the workflow lays it out: summary.source resolves
    results.mkdir()
    runs.rename(results / "runs")
    files = sorted((results / "runs").glob("*.json"))
    aggregate.aggregate(files, results / "summary.parquet", results / "summary.csv",
                        mix_foreign=True)
    mixed = resultset.load(results / "summary.parquet")
    assert mixed.elsewhere["compared"].tolist() == ["yes"]
    assert files[0].stem in set(mixed.summary["cell_id"])


@pytest.mark.slow  # Snakemake plans the tiny matrix twice: about 20 s
def test_the_config_key_reaches_aggregation(tmp_path):
    for mix in (False, True):
        planned = snakemake(tmp_path, tiny_config(report={"mix_foreign": mix}), "-n", "-p",
                            "--cores", "1", "results/summary.parquet")
        assert planned.returncode == 0, planned.stderr[-2000:]
        command = next(line for line in planned.stdout.splitlines()
                       if "-m dlbench aggregate" in line)
        assert ("--mix-foreign" in command) == mix
