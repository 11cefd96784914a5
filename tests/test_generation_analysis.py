"""The generation section's tables and figures on a synthetic summary: a wrong answer is
marked and left out of the figures, cells that did not run read N/A with their reason."""

import math

import matplotlib
import pandas as pd
import pytest

from dlbench.analysis import generation

matplotlib.use("Agg")


def row(framework, optimization, batch, seqlen, median, first, per_token, steps=None,
        wrong=False, status="ok", reason=None, **extra):
    return {"scenario": "generation", "framework": framework, "optimization": optimization,
            "model": "gpt2", "device": "cpu", "batch": batch, "seqlen": seqlen,
            "new_tokens": 4, "status": status, "reason": reason,
            "median_ms": median if status == "ok" else math.nan,
            "tokens_per_s": batch * 4 / (median / 1e3) if status == "ok" else math.nan,
            "generation_first_token_ms": first if status == "ok" else math.nan,
            "generation_per_token_ms": per_token if status == "ok" else math.nan,
            "generation_per_position_ms": steps,
            "median_ci95_ms_low": median * 0.9 if status == "ok" else math.nan,
            "median_ci95_ms_high": median * 1.1 if status == "ok" else math.nan,
            "wrong_answer": wrong, "precision": "fp32", **extra}


SUMMARY = pd.DataFrame([
    row("pytorch", "eager", 1, 8, 10.0, 4.0, 2.0, steps=[2.0, 2.1, 2.2],
        correctness_share_equal=1.0, correctness_first_divergence=math.nan,
        correctness_required=True),
    row("pytorch", "eager", 4, 8, 20.0, 8.0, 4.0, steps=[4.0, 4.1, 4.2],
        correctness_share_equal=1.0, correctness_first_divergence=math.nan,
        correctness_required=True),
    row("pytorch", "planted-error", 1, 8, 9.0, 3.0, 2.0, steps=[2.0, 2.0, 2.0], wrong=True,
        correctness_share_equal=0.75, correctness_first_divergence=2.0,
        correctness_required=True),
    row("tensorflow", "xla", 1, 8, 5.0, 2.0, 1.0, correctness_share_equal=1.0,
        correctness_first_divergence=math.nan, correctness_required=True),
    row("tensorflow", "xla", 4, 8, 1.0, 1.0, 1.0, status="oom", reason="out of memory"),
])


def test_the_sheets_mark_wrong_answers_and_cells_that_did_not_run():
    sheets = {(s.framework, s.optimization): s.table
              for s in generation.sheets(SUMMARY, generation.FIRST_TOKEN)}
    assert sheets[("pytorch", "eager")].loc[("gpt2", 4), "prompt 8"] == "8.00"
    assert sheets[("pytorch", "planted-error")].loc[("gpt2", 1), "prompt 8"] == "3.00 ✗"
    assert sheets[("tensorflow", "xla")].loc[("gpt2", 4), "prompt 8"].startswith("N/A")


def test_the_step_figure_has_right_answers_with_steps_only():
    steps = generation.positions(SUMMARY)
    assert set(steps["optimization"]) == {"eager"}  # xla: no steps; planted-error: wrong
    assert list(steps[steps["batch"].eq(4)]["position"]) == [1, 2, 3]
    assert generation.plot_positions(steps) is not None
    assert generation.plot_positions(steps.iloc[0:0]) is None


def test_tokens_per_second_have_their_intervals():
    rates = generation.tokens_per_s(SUMMARY)
    pairs = set(zip(rates["framework"], rates["optimization"], strict=True))
    assert pairs == {("pytorch", "eager"), ("tensorflow", "xla")}
    assert (rates["low"] < rates["tokens_per_s"]).all()
    assert (rates["tokens_per_s"] < rates["high"]).all()
    # From the latency's interval, as the summary has it: 10% slower is 1/1.1 of the rate.
    assert rates["low"].tolist() == pytest.approx((rates["tokens_per_s"] / 1.1).tolist())
    assert generation.plot_tokens_per_s(rates) is not None


@pytest.mark.parametrize("batches", [[1], [1, 2, 4]])
def test_tokens_per_second_against_batch_size_reads_in_plain_numbers(batches):
    """The report turns mathtext off (dlbench.report.display: a record's text is shown as
    text), so matplotlib's own log-axis labels read `$\\mathdefault{2^{0}}$` there: the
    batch sizes are the ticks, in plain numbers."""
    import matplotlib.pyplot as plt

    import dlbench.report.display  # noqa: F401 (the report's settings)

    assert plt.rcParams["text.parse_math"] is False
    rates = pd.DataFrame([{"model": "gpt2", "seqlen": 8, "framework": "pytorch",
                           "optimization": "eager", "batch": b, "tokens_per_s": 10.0 * b,
                           "low": 9.0 * b, "high": 11.0 * b} for b in batches])
    figure = generation.plot_tokens_per_s(rates)
    figure.canvas.draw()
    axis = figure.axes[0]
    assert [t.get_text() for t in axis.get_xticklabels()] == [str(b) for b in batches]
    labels = [t.get_text() for t in axis.get_xticklabels(minor=True)
              + axis.get_yticklabels()]
    assert not [text for text in labels if "$" in text or "mathdefault" in text]
    plt.close(figure)


def test_the_token_check_names_the_divergence():
    checks = generation.token_check(SUMMARY).set_index("optimization")
    assert checks.loc["planted-error", "verdict"] == "✗ diverged"
    assert checks.loc["planted-error", "first divergence"] == 2
    assert (checks.drop("planted-error")["verdict"] == "✓ equal").all()


def other_prompt(recompiled: bool, added: int, counted: str) -> dict:
    return {"generation_other_prompt_prompt_length": 7,
            "generation_other_prompt_recompiled": recompiled,
            "generation_other_prompt_new_compilations": added,
            "generation_other_prompt_call_s": 1.5, "generation_other_prompt_counted": counted}


def test_recompilations_across_prompt_lengths_list_compiled_recipes_only():
    summary = pd.DataFrame([
        row("pytorch", "eager", 1, 8, 10.0, 4.0, 2.0),  # compiles nothing: not listed
        row("tensorflow", "xla", 1, 8, 5.0, 2.0, 1.0, **other_prompt(False, 0, "traces")),
        row("jax", "jit", 1, 8, 6.0, 2.0, 1.0, **other_prompt(True, 1, "XLA programs")),
    ])
    summary.loc[0, "generation_other_prompt_recompiled"] = None
    table = generation.recompilations(summary).set_index("framework")
    assert list(table.index) == ["tensorflow", "jax"]
    assert table.loc["tensorflow", "compiled anew"] == "no"
    assert table.loc["jax", "compiled anew"] == "yes (1)"
    assert table.loc["jax", "other prompt"] == 7 and table.loc["jax", "prompt"] == 8
    assert generation.recompilations(SUMMARY).empty  # cells without the column


def test_a_time_per_token_that_is_not_above_zero_is_not_published():
    """(whole − first token) / (new − 1) with the first token timed apart: a real model's
    steps show (10 ms whole, 4 ms first: 2 ms a token); a tiny one's can be inside the
    difference between the two programs (0.52 ms whole, 0.589 ms first, as seen with
    tiny-gpt2 in TensorFlow XLA): no time per token, a note, never a negative time."""
    from dlbench.scenarios.generation import per_token_from_whole

    resolved = per_token_from_whole([10.0, 10.5, 9.5], 4.0, 4)
    assert resolved["per_token_ms"] == resolved["per_token"]["median_ms"] == 2.0
    assert "per_token_note" not in resolved
    unresolved = per_token_from_whole([0.52, 0.51, 0.53], 0.589, 4)
    assert unresolved["per_token_ms"] is None
    assert unresolved["per_token_note"].startswith("not resolved: the whole generation (0.52")
    summary = pd.DataFrame([row("tensorflow", "xla", 2, 8, 0.52, 0.589, math.nan,
                                generation_per_token_note=unresolved["per_token_note"])])
    [sheet] = generation.sheets(summary, generation.PER_TOKEN)
    assert sheet.table.loc[("gpt2", 2), "prompt 8"].startswith("not resolved:")
    [sheet] = generation.sheets(summary, generation.FIRST_TOKEN)
    assert sheet.table.loc[("gpt2", 2), "prompt 8"] == "0.59"


def test_in_rounds_each_figure_shows_its_processes_range():
    """Two rounds whose processes put the frameworks in opposite orders per token (a
    default run: TensorFlow xla 22.65 then 19.07 ms, JAX jit 20.22 then 22.01): each figure
    reads with its rounds' range, so that neither reads as ahead on its own."""
    summary = pd.DataFrame([
        row("tensorflow", "xla", 1, 32, 690.0, 55.0, 20.78,
            generation_rounds_per_token_ms=[22.65, 19.07],
            generation_rounds_first_token_ms=[55.0, 58.6]),
        row("jax", "jit", 1, 32, 700.0, 60.0, 21.10,
            generation_rounds_per_token_ms=[20.22, 22.01],
            generation_rounds_first_token_ms=[60.0, 60.1])])
    per_token = {s.framework: s.table.iloc[0, 0]
                 for s in generation.sheets(summary, generation.PER_TOKEN)}
    assert per_token == {"tensorflow": "20.78 (19.07–22.65)", "jax": "21.10 (20.22–22.01)"}
    [first, _] = generation.sheets(summary, generation.FIRST_TOKEN)
    assert first.table.iloc[0, 0] == "55.00 (55.00–58.60)"
    # Without rounds, the figure alone.
    [alone] = generation.sheets(SUMMARY.iloc[[3]], generation.PER_TOKEN)
    assert alone.table.iloc[0, 0] == "1.00"
