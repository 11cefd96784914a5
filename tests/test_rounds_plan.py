"""The order of a run's jobs in rounds (dlbench.plan.rounds) and what a cell's rounds
combine to (dlbench.run.rounds), without measuring: the units, the rounds each takes part
in (a training cell's are its seeds), the alternating order, and the combined record."""

import copy

from dlbench.plan import config, rounds
from dlbench.plan.matrix import expand_cells
from dlbench.run import rounds as run_rounds
from tests.conftest import TINY_CONFIG


def _config(**measurement):
    raw = copy.deepcopy(TINY_CONFIG)
    raw["devices"] = ["cpu"]
    raw["inference"]["sequence_lengths"] = [8]
    raw["training"] = {"models": ["tiny-cnn"], "datasets": ["synthetic"], "batch_sizes": [32],
                       "pipelines": ["w0"], "optimizers": ["sgd"], "seeds": 2,
                       "optimizations": {"pytorch": ["eager"], "tensorflow": ["graph"],
                                         "jax": ["jit"]}}
    raw["measurement"].update(measurement)
    return config.validate(raw)


def test_each_round_runs_in_the_reverse_order_of_the_one_before():
    settings = _config(process="per_group", rounds=3)
    units = rounds.units(expand_cells(settings), "per_group")
    counts = {key: rounds.unit_rounds(cells, settings) for key, cells in units.items()}
    # Inference groups: every round; training cells: their 2 seeds; a framework's cells of
    # another framework's optimization only record why not: one job, outside the rounds.
    assert counts["pytorch_tiny-bert_cpu_eager"] == 3
    assert counts["training_jax_tiny-cnn_cpu_b32_synthetic_w0_sgd_jit"] == 2
    assert counts["pytorch_tiny-bert_cpu_graph"] == 1
    chain = rounds.schedule(units, counts, settings["scenarios"])["cpu"]
    by_round = [[key for key, r in chain if r == round_] for round_ in range(3)]
    assert by_round[1] == by_round[0][::-1]
    assert [k for k in by_round[2] if counts[k] == 3] == [k for k in by_round[0]
                                                          if counts[k] == 3]
    assert not any(k.startswith("training") for k in by_round[2])  # 2 seeds: 2 rounds
    # A scenario's units stay together, each model's frameworks side by side.
    scenarios = [k.startswith("training") for k in by_round[0]]
    assert scenarios == sorted(scenarios)
    assert all(counts[key] > 1 for key, _ in chain)
    before = rounds.previous({"cpu": chain})
    assert chain[0] not in before and before[chain[1]] == chain[0]
    assert len(before) == len(chain) - 1


def test_one_round_is_no_schedule():
    settings = _config(process="per_cell", rounds=1)
    units = rounds.units(expand_cells(settings), "per_cell")
    counts = {key: rounds.unit_rounds(cells, settings) for key, cells in units.items()}
    assert set(counts.values()) == {1}
    assert rounds.schedule(units, counts, settings["scenarios"]) == {}


def _record(median: float, started: str, iqr: float = 0.02, status: str = "ok") -> dict:
    from dlbench.scenarios.inference import cell

    tiny = cell("pytorch", "tiny-bert", "cpu", 1, 8, "eager")
    return {"cell_id": tiny.id, "status": status,
            "reason": None if status == "ok" else "crashed: killed by SIGKILL",
            "params": tiny.params(), "started_at": started, "settings": {"threads": 2},
            "timing": {"median_ms": median, "relative_iqr": iqr, "samples_ms": [median] * 6,
                       "iqr_ms": median * iqr, "iterations": 6, "cold_start_s": 0.1,
                       "loop_s": median * 6e-3},
            "memory": {"peak_host_rss_mb": 100.0}, "utilization": None}


def test_a_cells_rounds_combine_with_each_rounds_figures_kept():
    from dlbench.scenarios.inference import cell

    tiny = cell("pytorch", "tiny-bert", "cpu", 1, 8, "eager")
    records = [_record(1.0, "t0", 0.3), _record(1.2, "t1"), _record(1.1, "t2")]
    before = copy.deepcopy(records)
    assert tiny.spec.combine(records)["throughput"]  # the inference scenario's own combine
    assert records == before  # … makes a new record: the rounds' records stay as read
    final = run_rounds.combine(tiny, records)
    assert final["timing"]["rounds"]["median_ms"] == [1.0, 1.2, 1.1]
    assert final["timing"]["rounds"]["started_at"] == ["t0", "t1", "t2"]
    assert final["timing"]["between_processes"]["processes"] == 3
    # Unstable is judged on each round's own spread (their median: 2%), not on the pooled
    # samples, which the rounds' different levels would spread.
    assert not final["flags"]["unstable"]
    assert records == before  # the rounds' records stay as read
    crashed = run_rounds.combine(tiny, [records[0], _record(0, "t1", status="error")])
    assert crashed["status"] == "error"
    assert crashed["reason"] == "round 2 of 2: crashed: killed by SIGKILL"


def test_an_interleaved_comparison_runs_a_side_in_rounds_as_one_round_of_its_own():
    """`dlbench compare --interleave` runs a side's measuring commands itself, round after
    round: a side whose config has rounds (the default) gives its last round's command
    without the round's options, its earlier rounds' jobs none (dlbench.run.interleave)."""
    from dlbench.run import interleave

    command = ("PYTHONPATH=/src /py -m dlbench run --framework=pytorch --model=tiny-bert "
               "--device=cpu --batch 1 2 --seqlen 8 --optimization=eager --round=1 "
               "--rounds-dir=results/rounds --out-dir results/runs > log 2>&1")
    job = interleave._job(command, ("a", "b"))
    assert job.env == {"PYTHONPATH": "/src"}
    assert not any(w.startswith("--round") for w in job.argv)
    assert job.argv[-2:] == ["--out-dir", "results/runs"]
