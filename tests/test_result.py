"""Result records: schema v2 with a part per scenario, v1 files read as inference, atomic
writing, and files that cannot be used are named with the reason."""

import json

import pytest

from dlbench.files import atomic
from dlbench.records import aggregate, result


def record(**changes) -> dict:
    base = {
        "schema_version": result.SCHEMA_VERSION,
        "cell_id": "pytorch_tiny-bert_gpu_b1_s8_eager",
        "params": {"scenario": "inference", "framework": "pytorch", "model": "tiny-bert",
                   "device": "gpu", "batch": 1, "seqlen": 8, "optimization": "eager"},
        "params_hash": "0123456789abcdef",
        "status": "unsupported",
        "reason": "no GPU",
        "started_at": "2026-11-21T10:00:00.000+00:00",
        "finished_at": "2026-11-21T10:00:01.000+00:00",
        "settings": {"warmup_iterations": 1, "min_duration_s": 0.1, "min_iterations": 3,
                     "threads": 2, "interop_threads": 1, "seed": 0},
        "environment": {"hostname": "h", "cpu_model": "c", "logical_cpus": 2, "python": "3.11",
                        "libraries": {}, "git": {"commit": None, "dirty": None}},
    }
    return {**base, **changes}


def test_atomic_write_leaves_no_partial_file(tmp_path):
    path = tmp_path / "runs" / "cell.json"
    atomic.write_json_atomic(path, record())
    assert json.loads(path.read_text())["status"] == "unsupported"
    with pytest.raises(TypeError):  # not serializable: fails half-way through dumping
        atomic.write_json_atomic(path, record(reason=object()))
    assert json.loads(path.read_text())["reason"] == "no GPU"  # the old file is intact
    assert [p.name for p in path.parent.iterdir()] == ["cell.json"]  # no temporary left


def test_ok_without_measurements_is_invalid():
    with pytest.raises(ValueError, match="timing"):
        result.validate(record(status="ok", reason=None))


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ('{"schema_version": 1, "cell_id": ', "not valid JSON"),
        ("[1, 2]", "not a result record"),
        (json.dumps(record(schema_version=0)),
         "schema version 0, this dlbench reads versions 1 and 2"),
        (json.dumps(record(status="finished")), "'finished' is not one of"),
        (json.dumps(record(params={"scenario": "inference", "framework": "pytorch"})),
         "is a required property"),
    ],
)
def test_unusable_files_are_named(tmp_path, content, expected):
    path = tmp_path / "broken_cell.json"
    path.write_text(content)
    with pytest.raises(result.ResultError) as caught:
        aggregate.summarize([path])
    assert str(path) in str(caught.value)
    assert expected in str(caught.value)


def test_summary_keeps_every_status(tmp_path):
    paths = []
    for i, status in enumerate(["unsupported", "error", "oom"]):
        path = tmp_path / f"{i}.json"
        path.write_text(json.dumps(record(cell_id=f"cell-{i}", status=status, reason=f"why {i}")))
        paths.append(path)
    frame = aggregate.summarize(paths)
    assert sorted(frame["status"]) == ["error", "oom", "unsupported"]
    assert set(frame["reason"]) == {"why 0", "why 1", "why 2"}


def test_each_scenario_checks_its_own_part():
    params = record()["params"]
    with pytest.raises(ValueError, match="'seqlen' is a required property"):
        result.validate(record(params={k: v for k, v in params.items() if k != "seqlen"}))
    with pytest.raises(ValueError, match="Unevaluated properties are not allowed"):
        result.validate(record(params={**params, "epochs": 3}))  # not an inference axis
    with pytest.raises(ValueError, match="at params"):  # no scenario: none of its axes fit
        result.validate(record(params={**params, "scenario": "nope"}))
    ok = record(status="ok", reason=None, threads={"intra_op": 2, "inter_op": 1, "env": {}},
                timing={"cold_start_s": 1, "iterations": 1, "samples_ms": [1], "median_ms": 1,
                        "mean_ms": 1, "p90_ms": 1, "p99_ms": 1, "std_ms": 0},
                memory={"peak_host_rss_mb": 10, "method": "m"})
    with pytest.raises(ValueError, match="'throughput' is a required property"):
        result.validate(ok)  # inference's own requirement of a measured cell
    result.validate({**ok, "throughput": {"samples_per_s": 1, "tokens_per_s": 8}})


def test_version_1_files_are_read_as_inference(tmp_path):
    v1 = record(schema_version=1)
    v1["params"] = {k: v for k, v in v1["params"].items() if k != "scenario"}
    path = tmp_path / "v1.json"
    path.write_text(json.dumps(v1))
    read = result.read(path)
    assert read["schema_version"] == 2 and read["params"]["scenario"] == "inference"
    result.validate(read)
    frame = aggregate.summarize([path])
    assert frame.loc[0, "scenario"] == "inference" and frame.loc[0, "seqlen"] == 8
    # A v1 file is checked against the v1 schema, as it was written.
    path.write_text(json.dumps({**v1, "params": {**v1["params"], "epochs": 3}}))
    with pytest.raises(result.ResultError, match="result.v1.schema.json"):
        result.read(path)
