"""dlbench.analysis.train_step and its plot on small hand-built summaries: every value below
is worked out by hand from the cells it is built from."""

import matplotlib
import numpy as np
import pandas as pd
import pytest
from matplotlib import pyplot as plt

from dlbench.analysis import plots, train_step
from dlbench.analysis.summary import derive

matplotlib.use("Agg")
IMPLEMENTATIONS = {"pytorch": "for-loop over the parameters", "tensorflow": "tf_keras.Adam: "
                   "TensorFlow ops per variable", "jax": "optax.adam, inside the jitted step"}


def cell(framework="pytorch", optimization="eager", optimizer="adam", step=None,
         forward=None, update=None, *, status="ok", reason=None, model="tiny", batch=2,
         seqlen=16, wrong=False) -> dict:
    """One summary row of the scenario; the parts' share is update / step."""
    row = {"cell_id": f"train_step_{framework}_{model}_cpu_b{batch}_s{seqlen}_{optimizer}_"
                      f"{optimization}",
           "cold_start_s": 12.5 if optimization == "graph" else 0.5,
           "scenario": "train_step", "framework": framework, "model": model, "device": "cpu",
           "batch": batch, "seqlen": seqlen, "optimizer": optimizer,
           "optimization": optimization, "status": status, "reason": reason,
           "median_ms": step if status == "ok" else np.nan}
    if status == "ok":
        row.update(samples_per_s=batch / step * 1e3, tokens_per_s=batch * seqlen / step * 1e3,
                   step_implementation=IMPLEMENTATIONS[framework],
                   correctness_within_tolerance=not wrong,
                   correctness_max_rel_error=0.5 if wrong else 3e-8,
                   correctness_tolerance=1e-4)
        if update is not None:
            row.update(breakdown_forward_backward_median_ms=forward,
                       breakdown_optimizer_median_ms=update,
                       breakdown_optimizer_share=update / step)
    return row


def frame(*rows: dict) -> pd.DataFrame:
    return derive(pd.DataFrame(list(rows)))


@pytest.fixture
def summary() -> pd.DataFrame:
    """One shape: PyTorch eager, fused and compile-step, TensorFlow eager and graph, with
    SGD and Adam; TensorFlow's xla out of memory; PyTorch × graph by design; a second shape
    of PyTorch alone."""
    return frame(
        cell("pytorch", "eager", "adam", 20.0, 16.0, 4.0),
        cell("pytorch", "eager", "sgd", 18.0, 16.0, 2.0),
        cell("pytorch", "fused", "adam", 17.0, 16.0, 1.0),
        cell("pytorch", "compile-step", "adam", 10.0),
        cell("pytorch", "graph", "adam", status="unsupported",
             reason="optimization 'graph' does not exist in PyTorch training (only in "
                    "TensorFlow)"),
        cell("tensorflow", "eager", "adam", 100.0, 40.0, 60.0),
        cell("tensorflow", "graph", "adam", 25.0, 15.0, 10.0, wrong=True),
        cell("tensorflow", "graph", "sgd", 19.0, 15.0, 4.0),
        cell("tensorflow", "xla", "adam", status="oom", reason="out of memory"),
        cell("pytorch", "eager", "adam", 40.0, 36.0, 4.0, seqlen=32),
    )


def test_steps_have_their_parts_or_none(summary):
    steps = train_step.steps(summary).set_index("cell_id")
    compiled = steps.loc["train_step_pytorch_tiny_cpu_b2_s16_adam_compile-step"]
    assert not compiled.separable and np.isnan(compiled.optimizer_ms)
    eager = steps.loc["train_step_pytorch_tiny_cpu_b2_s16_adam_eager"]
    assert eager.separable and eager.optimizer_share == 0.2
    assert len(steps) == 8  # the timed cells only


def test_the_step_table_has_every_cell_but_the_other_frameworks(summary):
    table, by_design = train_step.step_table(summary, several_devices=False)
    assert by_design == 1 and len(table) == 9
    rows = table.set_index(["length", "optimizer", "framework", "optimization"])
    eager = rows.loc[(16, "adam", "PyTorch", "eager")]
    assert (eager["step ms"], eager["forward + backward ms"], eager["optimizer ms"],
            eager["optimizer share"]) == ("20.0", "16.0", "4.00", "20.0%")
    assert rows.loc[(16, "adam", "PyTorch", "fused"), "speed-up over eager"] == "1.18×"
    assert rows.loc[(16, "adam", "TensorFlow", "graph"), "speed-up over eager"] == "4.00×"
    compiled = rows.loc[(16, "adam", "PyTorch", "compile-step")]
    assert compiled["optimizer ms"] == train_step.NOT_SEPARABLE
    assert compiled["optimizer share"] == ""
    assert rows.loc[(16, "adam", "TensorFlow", "xla"), "step ms"] == "N/A (out of memory)"
    assert rows.loc[(16, "adam", "TensorFlow", "graph"),
                    "initial loss vs reference"] == "✗ 5.0e-01"
    assert rows.loc[(16, "adam", "TensorFlow", "eager"),
                    "initial loss vs reference"] == "✓ 3.0e-08"
    assert rows.loc[(16, "adam", "PyTorch", "eager"), "samples/s"] == "100"
    assert rows.loc[(16, "adam", "TensorFlow", "graph"), "first step s"] == "12.50"
    assert rows.loc[(16, "adam", "PyTorch", "eager"), "tokens/s"] == "1,600"


def test_bars_per_shape_in_order(summary):
    bars = train_step.bars(summary)
    assert list(bars) == [("tiny", "cpu", 2, 16), ("tiny", "cpu", 2, 32)]
    first = bars[("tiny", "cpu", 2, 16)]
    assert list(first["label"]) == [
        "PyTorch compile-step · adam", "PyTorch eager · adam", "PyTorch fused · adam",
        "TensorFlow eager · adam", "TensorFlow graph · adam", "PyTorch eager · sgd",
        "TensorFlow graph · sgd"]
    assert list(first["optimizer_ms"].fillna(-1)) == [-1, 4.0, 1.0, 60.0, 10.0, 2.0, 4.0]
    assert first["step_ms"].iloc[0] == 10.0


def test_the_share_table_compares_the_optimizers(summary):
    table = train_step.share_table(summary, several_devices=False).set_index(
        ["framework", "optimization"])
    # PyTorch eager Adam: the median of 4.0 ms at both lengths; shares 20% and 10%.
    assert table.loc[("PyTorch", "eager"), "adam: optimizer ms"] == "4.00"
    assert table.loc[("PyTorch", "eager"), "adam: share"] == "15.0%"
    assert table.loc[("PyTorch", "eager"), "adam − sgd ms"] == "2.00"
    assert table.loc[("TensorFlow", "graph"), "adam − sgd ms"] == "6.00"
    assert table.loc[("PyTorch", "fused"), "adam − sgd ms"] == ""  # no SGD cell
    assert ("PyTorch", "compile-step") not in table.index  # not separable


def test_the_seed_answer_compares_eager_pytorch_with_graph_tensorflow(summary):
    lines = train_step.seed_answer(summary)
    text = "\n".join(lines)
    assert ("Adam's update took 20.0% of PyTorch's `eager` step and 40.0% of TensorFlow's "
            "`graph` step (medians over the 1 shape that both have)") in text
    assert ("PyTorch's `eager` Adam took 4.00 ms per step, TensorFlow's `graph` Adam 10.0 ms: "
            "PyTorch's was the fastest; TensorFlow's was 2.5× slower than PyTorch's, a "
            "difference of 24.0% of TensorFlow's step.") in text
    # Every recipe with the shared shape; compile-step is not separable, seqlen 32 not shared.
    assert ("per optimization: PyTorch `fused` 1.00 ms, `eager` 4.00 ms; TensorFlow "
            "`graph` 10.0 ms, `eager` 60.0 ms.") in text
    # Markdown: the recorded implementation's '_' is text, not emphasis.
    assert "PyTorch — for-loop over the parameters; TensorFlow — tf\\_keras.Adam" in text
    assert "ResourceApplyAdam) is the legacy optimizer's" in text


def test_the_seed_answer_says_how_much_slower_and_what_it_costs():
    lines = train_step.seed_answer(frame(
        cell("pytorch", "eager", "adam", 30.0, 24.0, 6.0),
        cell("tensorflow", "eager", "adam", 26.0, 24.0, 2.0),  # no graph: the fastest
    ))
    assert ("TensorFlow's `eager` Adam 2.00 ms: TensorFlow's was the fastest; PyTorch's was "
            "3.0× slower than TensorFlow's, a difference of 13.3% of PyTorch's step."
            ) in "\n".join(lines)


@pytest.mark.parametrize("rows", [
    [cell("pytorch", "eager", "adam", 30.0, 24.0, 6.0)],  # one framework
    [cell("pytorch", "eager", "adam", 30.0, 24.0, 6.0),  # no shape in common
     cell("tensorflow", "graph", "adam", 26.0, 24.0, 2.0, seqlen=32)],
    [cell("pytorch", "compile-step", "adam", 30.0),  # not separable
     cell("tensorflow", "graph", "adam", 26.0, 24.0, 2.0)],
    [cell("pytorch", "eager", "sgd", 30.0, 24.0, 6.0),  # SGD only
     cell("tensorflow", "graph", "sgd", 26.0, 24.0, 2.0)],
])
def test_no_seed_answer_without_adam_steps_of_both_frameworks(rows):
    assert train_step.seed_answer(frame(*rows)) == []


def test_the_bars_draw_both_parts_and_the_whole_steps(summary):
    bars = train_step.bars(summary)[("tiny", "cpu", 2, 16)]
    fig, ax = plt.subplots()
    assert plots.optimizer_share(ax, bars, "tiny, batch 2, length 16") is ax
    widths = [p.get_width() for p in ax.patches]
    # Forward + backward, the optimizer step, and the whole step of compile-step only.
    assert widths == [0, 16, 16, 40, 15, 16, 15] + [0, 4, 1, 60, 10, 2, 4] + [10] + [0] * 6
    labels = [t.get_text() for t in ax.get_yticklabels()]
    assert labels[0] == "PyTorch compile-step · adam"
    assert [t.get_text() for t in ax.texts] == [" 20%", " 6%", " 60%", " 40%", " 11%", " 21%"]
    assert ax.get_title() == "tiny, batch 2, length 16"
    plt.close(fig)


def test_the_seed_answer_points_at_tensorflows_cpp_optimizer_when_measured():
    lines = train_step.seed_answer(frame(
        cell("pytorch", "eager", "adam", 30.0, 24.0, 6.0),
        cell("tensorflow", "graph", "adam", 26.0, 24.0, 2.0),
        cell("tensorflow", "legacy-optimizer", "adam", 60.0, 57.0, 3.0),
    ))
    text = "\n".join(lines)
    assert "TensorFlow `graph` 2.00 ms, `legacy-optimizer` 3.00 ms." in text
    assert "is the legacy optimizer's (`legacy-optimizer` above)." in text


def test_a_summary_without_timed_steps_has_only_reasons():
    summary = frame(cell("pytorch", "eager", status="error", reason="RuntimeError: boom"),
                    cell("tensorflow", "graph", status="unsupported",
                         reason="this CPU has no native bf16 arithmetic"))
    table, by_design = train_step.step_table(summary, several_devices=False)
    assert list(table["step ms"]) == ["N/A (RuntimeError: boom)",
                                      "N/A (this CPU has no native bf16 arithmetic)"]
    assert by_design == 0
    assert train_step.bars(summary) == {} and train_step.seed_answer(summary) == []
    assert train_step.share_table(summary, several_devices=False).empty
    assert train_step.optimizer_costs(summary).empty
