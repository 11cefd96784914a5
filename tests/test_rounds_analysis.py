"""Ratios paired round by round (dlbench.analysis.rounds) on synthetic rounds: the
machine's drift between rounds cancels, the interval covers the true ratio as often as it
says, a real difference is found and a tie stays a tie, and a cell whose processes
disagree beyond the drift is flagged while the others are not."""

import math
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest

from dlbench.analysis import headline, plots, ratio, rounds, speedup
from tests.test_analysis import cell, frame


def _rounds_frame(levels: dict, drift: list[float], noise: float, rng, own: dict | None = None):
    """A summary of inference cells (framework, optimization) → level in ms, each measured
    in len(drift) rounds: level × (1 + the round's drift) × its own noise (lognormal), and
    for the cells in `own` their own factor of each round besides."""
    rows = []
    for (framework, optimization), level in levels.items():
        extra = (own or {}).get((framework, optimization), [1.0] * len(drift))
        values = [level * (1 + d) * e * math.exp(rng.normal(0, noise))
                  for d, e in zip(drift, extra, strict=True)]
        rows.append(cell(framework, optimization, float(np.median(values)),
                         model="bert-base-uncased", seqlen=16,
                         rounds_median_ms=values))
    return frame(*rows).assign(scenario="inference")


def test_the_drift_between_rounds_cancels_in_a_paired_ratio():
    """Rounds 0 and 2 run on a machine 25% slower than round 1 (a neighbour's minute): the
    two frameworks' medians move together, their ratio does not."""
    rng = np.random.default_rng(0)
    drift = [0.25, 0.0, 0.25, 0.0]
    summary = _rounds_frame({("pytorch", "eager"): 40.0, ("tensorflow", "graph"): 48.0,
                             ("jax", "jit"): 44.0}, drift, 0.01, rng)
    spread = rounds.spread(summary)
    assert spread.rounds == 4 and spread.df == (3 - 1) * (4 - 1)
    assert spread.drift[0] - spread.drift[1] == pytest.approx(0.25, abs=0.03)
    assert math.sqrt(spread.variance) < 0.02  # the noise, not the drift
    rows = summary.set_index("framework")
    ratio, low, high, n = rounds.paired(rows.loc["tensorflow"], rows.loc["pytorch"], spread)
    assert n == 4 and low < 1.2 < high and high / low < 1.06
    assert ratio == pytest.approx(1.2, rel=0.02)
    # Every ratio within ±10%, as the issue asks of an idle machine's answer.
    assert high / ratio - 1 < 0.1 and 1 - low / ratio < 0.1


def test_the_interval_covers_the_true_ratio_as_often_as_it_says():
    """Simulated runs of 6 cells in 3 rounds with a random drift per round and 4%
    lognormal noise per process: the pooled, paired 95% interval holds the true ratio in
    about 95 of 100 runs — a little more, since a pair's own spread widens it where larger
    (not ~100: it is not padded; not ~80: it is not too narrow)."""
    rng = np.random.default_rng(1)
    levels = np.array([40.0, 38.0, 60.0, 48.0, 90.0, 44.0])  # pytorch eager … jax jit
    covered, runs = 0, 2000
    for _ in range(runs):
        drift = 1 + rng.normal(0, 0.1, size=3)
        values = levels[:, None] * drift[None, :] * np.exp(rng.normal(0, 0.04, size=(6, 3)))
        cells = pd.DataFrame({"rounds_median_ms": list(values), "headline_wall": False})
        spread = rounds.spread(cells)
        _, low, high, _ = rounds.paired(cells.loc[3], cells.loc[0], spread)
        covered += low <= 48.0 / 40.0 <= high
    assert 0.935 <= covered / runs <= 0.985, covered


@pytest.mark.parametrize("drift_sd", [0.0, 0.05])
def test_a_cells_interval_from_two_rounds_covers_its_level_as_often_as_it_says(drift_sd):
    """Six cells in two rounds (the default), each round's machine 0 or 5% off (lognormal)
    and each process 4% about it: a cell's interval from the pooled spread and the drift
    holds its true level in about 95 of 100 runs (its own two processes alone: Student's t
    with 1 degree of freedom, intervals 12.7 times as wide), and is narrower than ±15%."""
    rng = np.random.default_rng(5)
    levels = np.array([40.0, 38.0, 60.0, 48.0, 90.0, 44.0])
    covered, widths, runs = 0, [], 2000
    for _ in range(runs):
        drift = np.exp(rng.normal(0, drift_sd, size=2))
        values = levels[:, None] * drift[None, :] * np.exp(rng.normal(0, 0.04, size=(6, 2)))
        cells = pd.DataFrame({"rounds_median_ms": list(values),
                              "median_ms": np.exp(np.log(values).mean(axis=1))})
        low, high = rounds.level_interval(cells.loc[2], rounds.spread(cells))
        covered += low <= 60.0 <= high
        widths.append(high / low)
    assert 0.935 <= covered / runs <= 0.985, covered
    assert np.median(widths) < 1.15**2


@pytest.mark.parametrize(("drifts", "coverage"), [((0.05, 0.05, 0.05), 0.935),
                                                  ((0.10, 0.03, 0.03), 0.87)])
def test_the_drift_pooled_over_the_runs_scenarios_keeps_the_coverage_and_narrows(drifts,
                                                                                  coverage):
    """Three scenarios in two rounds, each round's machine off by the scenario's drift
    (lognormal, drawn anew for each scenario's rounds: they run at other minutes) and each
    process 4% about it: a cell's interval with the drift pooled over the scenarios
    (run_spreads: 3 degrees of freedom) holds its true level in about 95 of 100 runs where
    the scenarios drift alike (97%), and in the runs whose own scenario drifted most it is
    far narrower than with that scenario's one degree of freedom (a default run: ±53%
    where its inference rounds differed by 8%). Where inference drifts three times as
    much as the others (its rounds lie furthest apart in the schedule), its own drift
    where larger keeps 90% (the pooled one alone: 85.5%): two rounds know the drift
    poorly, whichever way it is taken."""
    rng = np.random.default_rng(8)
    levels = np.array([40.0, 38.0, 60.0, 48.0, 90.0, 44.0])
    covered, pooled_widths, own_widths, runs = 0, [], [], 500
    for _ in range(runs):
        run = []
        for name, sd in zip(("inference", "generation", "training"), drifts, strict=True):
            drift = np.exp(rng.normal(0, sd, size=2))
            values = levels[:, None] * drift[None, :] * np.exp(rng.normal(0, 0.04, (6, 2)))
            run.append(pd.DataFrame({"rounds_median_ms": list(values), "scenario": name,
                                     "median_ms": np.exp(np.log(values).mean(axis=1))}))
        run = pd.concat(run, ignore_index=True)
        shared = rounds.run_spreads(run)
        assert shared["inference"].drift_spread()[1] == 3
        low, high = rounds.level_interval(run.loc[2], shared["inference"])
        covered += low <= 60.0 <= high
        pooled_widths.append(high / low)
        own = rounds.level_interval(run.loc[2], rounds.spread(run.loc[:5]))
        own_widths.append(own[1] / own[0])
    assert coverage <= covered / runs <= 0.985, covered
    assert np.quantile(np.log(pooled_widths), 0.9) < 0.6 * np.quantile(np.log(own_widths), 0.9)


def test_the_summarys_intervals_come_from_the_rounds_where_it_has_them():
    """summary.derive replaces a cell's two-process interval by the pooled one; a summary
    without rounds keeps its cells' own."""
    from dlbench.analysis.summary import intervals_from_rounds

    rng = np.random.default_rng(6)
    summary = _rounds_frame({("pytorch", "eager"): 40.0, ("tensorflow", "graph"): 48.0,
                             ("jax", "jit"): 56.0}, [0.02, -0.02], 0.02, rng)
    summary = summary.assign(median_ci95_ms_low=summary["median_ms"] * 0.5,
                             median_ci95_ms_high=summary["median_ms"] * 2.0,
                             timed=True, profiled=False)
    pooled = rounds.spread(summary)
    narrowed = intervals_from_rounds(summary)
    for index, row in summary.iterrows():
        expected = rounds.level_interval(row, pooled)
        got = narrowed.loc[index, ["median_ci95_ms_low", "median_ci95_ms_high"]]
        assert tuple(got) == pytest.approx(expected)
        assert expected[1] / expected[0] < 1.5
    kept = intervals_from_rounds(summary.drop(columns="rounds_median_ms"))
    assert kept["median_ci95_ms_high"].tolist() == summary["median_ci95_ms_high"].tolist()


def test_the_scenarios_ranked_by_their_median_share_the_machines_spread():
    """Inference (three cells) and generation (two) in the same two rounds pool their
    spread between processes — one variance, the sum of their degrees of freedom — while
    each keeps its own drift (the rounds' levels); training, whose rounds are seeds and
    whose headline is the wall time per step, keeps its own spread. The drift's variance,
    the machine's, is pooled over all three, and never below a scenario's own."""
    rng = np.random.default_rng(7)
    levels = {("pytorch", "eager"): 40.0, ("tensorflow", "graph"): 48.0, ("jax", "jit"): 56.0}
    inference = _rounds_frame(levels, [0.02, -0.02], 0.02, rng)
    generation = _rounds_frame(dict(list(levels.items())[:2]), [0.05, -0.05], 0.02,
                               rng).assign(scenario="generation")
    training = _rounds_frame(levels, [0.0, 0.0], 0.08, rng).assign(scenario="training")
    run = pd.concat([inference, generation, training], ignore_index=True)
    alone = {name: rounds.spread(cells) for name, cells in run.groupby("scenario")}
    shared = rounds.run_spreads(run)
    df = alone["inference"].df + alone["generation"].df
    variance = (alone["inference"].variance * alone["inference"].df
                + alone["generation"].variance * alone["generation"].df) / df
    for name in ("inference", "generation"):
        assert (shared[name].df, shared[name].variance) == (df, pytest.approx(variance))
        assert shared[name].drift == alone[name].drift
    assert replace(shared["training"], drift_variance=None, drift_df=None) == alone["training"]
    # The drift, though, is the machine's whatever the scenario: pooled over all three.
    assert {shared[name].drift_spread()[1] for name in shared} == {3}
    pooled = np.mean([alone[name].own_drift_variance() for name in alone])
    for name in shared:
        assert shared[name].drift_spread()[0] == pytest.approx(
            max(pooled, alone[name].own_drift_variance()))


def test_a_real_difference_is_found_and_no_difference_is_a_tie():
    rng = np.random.default_rng(2)
    drift = [0.1, -0.05, 0.0]
    apart = _rounds_frame({("pytorch", "eager"): 40.0, ("tensorflow", "graph"): 44.0,
                           ("jax", "jit"): 60.0}, drift, 0.01, rng)
    answer = headline.winners(apart)["inference"].iloc[0]
    assert answer["fastest"] == "PyTorch eager"
    assert not answer["by how much"].startswith("tie") and "3 rounds" in answer["by how much"]
    same = _rounds_frame({("pytorch", "eager"): 40.0, ("tensorflow", "graph"): 40.0,
                          ("jax", "jit"): 60.0}, drift, 0.01, rng)
    assert headline.winners(same)["inference"].iloc[0]["by how much"].startswith("tie: ")


def test_a_speed_up_inside_the_noise_is_a_grey_tie_in_the_heatmap():
    """The speed-up over eager is paired by round as the answer's ratios are: TorchScript
    1.5× faster is coloured (green), one as fast as eager within the noise is a tie, grey
    and marked '=' (a default run coloured 1.05×, answer 0.93-1.18, as a speed-up)."""
    from matplotlib.figure import Figure

    rng = np.random.default_rng(4)
    drift = [0.1, -0.05, 0.0]
    summary = _rounds_frame({("pytorch", "eager"): 40.0, ("pytorch", "torchscript"): 26.7,
                             ("tensorflow", "eager"): 50.0, ("tensorflow", "graph"): 49.5},
                            drift, 0.03, rng)
    tied = speedup.ties(summary).set_axis(summary["optimization"]).to_dict()
    assert tied == {"eager": False, "torchscript": False, "graph": True}
    panels = {p.optimization: p for p in speedup.panels(summary)}
    assert panels["graph"].tied.iloc[0, 0] and not panels["torchscript"].tied.iloc[0, 0]
    for optimization, shown in (("graph", "= "), ("torchscript", "1.5")):
        ax = plots.speedup_heatmap(Figure().subplots(), panels[optimization],
                                   speedup.scale(summary), False)
        texts = [t.get_text() for t in ax.texts if t.get_text()]
        assert len(texts) == 1 and texts[0].startswith(shown), texts
        coloured = ax.collections[0].get_array()
        assert bool(np.ma.getmaskarray(coloured).all()) is (optimization == "graph")
    # Without rounds, from the two times' intervals; a tie that is a wrong answer says both.
    def timed(optimization, median, **extra):
        return cell("pytorch", optimization, median, median_ci95_ms_low=0.95 * median,
                    median_ci95_ms_high=1.05 * median, **extra)

    alone = frame(timed("eager", 10.0), timed("torchscript", 9.8, within=False),
                  timed("compile", 5.0))
    assert speedup.ties(alone).tolist() == [False, True, False]
    scripted = next(p for p in speedup.panels(alone) if p.optimization == "torchscript")
    ax = plots.speedup_heatmap(Figure().subplots(), scripted, 1.0, False)
    assert [t.get_text() for t in ax.texts if t.get_text()] == ["= 1.02 ✗"]


def test_the_ratio_table_gives_the_answers_figure_for_the_same_two_cells():
    """One comparison, one figure on the page: each framework's ratio against the fastest
    (the inference section's table) is the answer's paired ratio, not the ratio of the
    pooled medians with their two-round intervals (in the default run: 1.41, a tie from
    0.80 to 2.64, where the answer said 1.44, 1.31-1.58)."""
    rng = np.random.default_rng(3)
    drift = [0.2, -0.1]
    summary = _rounds_frame({("pytorch", "eager"): 40.0, ("tensorflow", "graph"): 48.0,
                             ("jax", "jit"): 56.0}, drift, 0.01, rng)
    # Each cell's interval as two rounds give it alone (Student's t with 1 degree of
    # freedom): far wider than the pooled one.
    summary = summary.assign(median_ci95_ms_low=summary["median_ms"] * 0.5,
                             median_ci95_ms_high=summary["median_ms"] * 2.0)
    table = ratio.against_fastest(summary).set_index("framework")
    rows, spread = summary.set_index("framework"), rounds.spread(summary)
    for framework in ("tensorflow", "jax"):
        paired = rounds.paired(rows.loc[framework], rows.loc["pytorch"], spread)
        figures = table.loc[framework, ["ratio", "ratio_low", "ratio_high", "rounds"]]
        assert tuple(figures) == pytest.approx(paired)
        assert table.loc[framework, "verdict"] == "slower"
        assert "2 rounds" in table.loc[framework, "text"]
    assert table.loc["pytorch", "verdict"] == "fastest"
    alone = summary.drop(columns="rounds_median_ms")
    assert ratio.against_fastest(alone).set_index("framework").loc["tensorflow",
                                                                   "verdict"] == "tie"


def test_without_rounds_the_answer_keeps_the_medians_intervals():
    summary = frame(cell("pytorch", "eager", 40.0, model="bert-base-uncased", seqlen=16),
                    cell("tensorflow", "graph", 60.0, model="bert-base-uncased", seqlen=16)
                    ).assign(scenario="inference")
    assert rounds.spread(summary) is None
    by = headline.winners(summary)["inference"].iloc[0]["by how much"]
    assert "rounds" not in by


def test_an_idle_machines_cells_are_rarely_flagged_spread_between_processes():
    """24 cells in two rounds, every process 3% about its cell's level and nothing else:
    in at most 3% of 400 simulated runs is any cell flagged (the test is at 1% for the
    scenario's cells together; at 1% a cell, a run had one flagged far more often)."""
    rng = np.random.default_rng(8)
    flagged = 0
    for _ in range(400):
        values = 40.0 * np.exp(rng.normal(0, 0.03, size=(24, 2)))
        cells = pd.DataFrame({"rounds_median_ms": list(values), "headline_wall": False})
        flagged += any(rounds.spread(cells).beyond.values())
    assert flagged / 400 <= 0.03, flagged


def test_at_the_defaults_two_rounds_one_cells_disagreeing_processes_are_flagged():
    """The default's shape (24 inference cells, two rounds, every process 3% about its
    cell's level): one cell whose second process ran 40% slower is flagged in every one of
    50 simulated runs (30%: 97% of 200 here), none of the others in more than 3% of them —
    the flag can fire at two rounds, where each cell's spread has about one degree of
    freedom."""
    rng = np.random.default_rng(9)
    slow, others = 0, 0
    for _ in range(50):
        values = 40.0 * np.exp(rng.normal(0, 0.03, size=(24, 2)))
        values[0, 1] *= 1.4
        beyond = rounds.spread(pd.DataFrame({"rounds_median_ms": list(values),
                                             "headline_wall": False})).beyond
        slow += beyond[0]
        others += any(beyond[i] for i in range(1, 24))
    assert slow == 50 and others <= 0.03 * 50, (slow, others)


def test_a_cell_whose_processes_disagree_beyond_the_drift_is_flagged():
    """Every cell moves with a 20% drift (not flagged: the machine's); one cell's own
    processes vary by ±15% on top (flagged, the reason says how much), as the summary's
    derived flags say (dlbench.analysis.summary.spread_between_rounds); with every cell as
    noisy as that one, none is flagged: it is the machine's noise, which the intervals
    carry."""
    rng = np.random.default_rng(3)
    levels = {("pytorch", "eager"): 40.0, ("pytorch", "torchscript"): 38.0,
              ("tensorflow", "eager"): 60.0, ("tensorflow", "graph"): 48.0,
              ("jax", "eager"): 90.0, ("jax", "jit"): 44.0}
    summary = _rounds_frame(levels, [0.2, 0.0, 0.2, 0.0], 0.01, rng,
                            own={("jax", "jit"): [1.15, 0.87, 0.87, 1.15]})
    flagged = summary  # derived: its flags judged against the drift (summary.derive)
    by = flagged.set_index(["framework", "optimization"])
    assert by["flags_spread_between_processes"].to_dict() == {
        ("pytorch", "eager"): False, ("pytorch", "torchscript"): False,
        ("tensorflow", "eager"): False, ("tensorflow", "graph"): False,
        ("jax", "eager"): False, ("jax", "jit"): True}
    reason = by.loc[("jax", "jit"), "flags_reasons"]
    assert reason.startswith("spread between processes: its 4 rounds vary by ")
    assert "beyond the machine's drift" in reason
    # The flag reaches the answer: a verdict resting on that cell says so, on no other.
    jit = flagged["optimization"].eq("jit")
    assert headline.rests_on_flagged(flagged[jit]).startswith("⚑")
    assert headline.rests_on_flagged(flagged[~jit]) == ""
    noisy = _rounds_frame(levels, [0.2, 0.0, 0.2, 0.0], 0.10, rng)
    assert not noisy["flags_spread_between_processes"].any()


def test_the_fastest_is_the_fastest_by_the_ratio_the_answer_gives():
    """In rounds, a cell's time is the geometric mean of its rounds' medians, the level its
    paired ratios compare: ranked by the pooled median instead, PyTorch (100 and 150 ms in
    its two rounds, 110 pooled) was named the fastest over TensorFlow (118 and 125 ms, 121
    pooled) with a runner-up ratio below 1 (0.99×), and the times shown did not divide to
    the ratio (the default run of 2026-11-30: 0.96×)."""
    from dlbench.format import fmt_fixed

    summary = frame(
        cell("pytorch", "eager", 110.0, model="bert-base-uncased", seqlen=16,
             rounds_median_ms=[100.0, 150.0]),
        cell("tensorflow", "graph", 121.0, model="bert-base-uncased", seqlen=16,
             rounds_median_ms=[118.0, 125.0])).assign(scenario="inference")
    level = {"pytorch": math.sqrt(100 * 150), "tensorflow": math.sqrt(118 * 125)}
    assert summary.set_index("framework")["headline_ms"].to_dict() == pytest.approx(level)
    answer = headline.winners(summary)["inference"].iloc[0]
    assert answer["fastest"] == "TensorFlow graph"
    column = headline.time_column(summary)
    assert column == "median ms (rounds' geometric mean)"  # the label says what it shows
    assert answer[column] == fmt_fixed(level["tensorflow"], 3)
    by = float(answer["by how much"].removeprefix("tie: ").split("×")[0])
    assert by >= 1 and by == pytest.approx(level["pytorch"] / level["tensorflow"], abs=0.005)
    table = ratio.against_fastest(summary).set_index("framework")
    assert table.loc["tensorflow", "verdict"] == "fastest"
    assert table.loc["pytorch", "ratio"] == pytest.approx(level["pytorch"] / level["tensorflow"])
    # All or none: beside a cell without rounds, every cell keeps its median, so that no
    # level is ranked against a pooled figure.
    mixed = frame(
        cell("pytorch", "eager", 110.0, model="bert-base-uncased", seqlen=16,
             rounds_median_ms=[100.0, 150.0]),
        cell("jax", "jit", 130.0, model="bert-base-uncased", seqlen=16)).assign(
        scenario="inference")
    assert mixed["headline_ms"].tolist() == [110.0, 130.0]
    assert headline.time_column(mixed) == headline.MEDIAN


def test_the_answer_says_how_many_rounds_would_put_its_ratios_within_ten_percent():
    """At the run's spread between processes, the answer says what its ratios' intervals
    span and the fewest rounds that would bring them within ±10%: nothing where they are
    already; the figure is the one `paired` gives a pair with that spread; a spread no
    number of rounds can beat says so instead of naming one."""
    from dataclasses import replace

    wide = rounds.Spread(variance=0.067**2, df=25, rounds=2, cells={}, drift=[0.0, 0.0],
                         beyond={})
    assert rounds.width_note(replace(wide, variance=0.031**2), "measurement.rounds") == ""
    needed = rounds.rounds_for(wide)
    assert needed == 4
    assert rounds.half_width(wide, needed) <= rounds.WIDTH < rounds.half_width(wide, needed - 1)
    # The half-width at the run's rounds is that of a pair whose own spread is the pooled.
    a = pd.Series({"rounds_median_ms": [10.0, 10.0], "headline_wall": False})
    b = pd.Series({"rounds_median_ms": [12.0, 12.0], "headline_wall": False})
    ratio_, low, high, count = rounds.paired(b, a, wide)
    assert count == 2 and high / ratio_ - 1 == pytest.approx(rounds.half_width(wide, 2))
    note = rounds.width_note(wide, "training.seeds")
    assert "spread by 6.7%" in note and "±15%" in note and "`training.seeds: 4`" in note
    hopeless = replace(wide, variance=0.5**2)
    assert rounds.rounds_for(hopeless) is None
    assert "more than 50 rounds" in rounds.width_note(hopeless, "measurement.rounds")
