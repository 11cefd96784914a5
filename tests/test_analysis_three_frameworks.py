"""The analysis with a third framework: synthetic summaries of PyTorch, TensorFlow and JAX
(`jax`, labelled JAX), worked out by hand. Nothing here names the frameworks inside the
analysis: they come from the registry (dlbench.catalogue.axes), where the fixture registers
JAX if it is not there yet."""

import matplotlib
import numpy as np
import pandas as pd
import pytest
from matplotlib.figure import Figure
from scipy.stats import norm

from dlbench.analysis import (
    environment,
    gpu,
    headline,
    plots,
    precision,
    ratio,
    train_step,
    training,
)
from dlbench.analysis.summary import timed
from dlbench.catalogue import axes, frameworks
from tests import test_train_step_analysis as steps
from tests.test_analysis import cell, frame, with_ci
from tests.test_training import trained_cells

matplotlib.use("Agg")


@pytest.fixture(autouse=True)
def jax(monkeypatch):
    """JAX as the third framework of the registry (nothing changes once it is registered)."""
    if "jax" not in axes.FRAMEWORKS:
        monkeypatch.setattr(axes, "FRAMEWORKS", (*axes.FRAMEWORKS, "jax"))
    monkeypatch.setitem(axes.FRAMEWORK_LABELS, "jax", "JAX")


def interval(framework, optimization, median, spread=0.05, **extra) -> dict:
    """A timed cell with a ±spread interval."""
    return cell(framework, optimization, median, **with_ci(median, median * (1 - spread),
                                                          median * (1 + spread)), **extra)


@pytest.fixture
def three() -> pd.DataFrame:
    """Length 8: PyTorch 10 ms, TensorFlow 20 ms, JAX 10.2 ms (a tie with PyTorch; its
    faster op-by-op cell is a wrong answer). Length 16: JAX 5 ms, PyTorch 10 ms, no
    TensorFlow. Length 32: TensorFlow alone."""
    return timed(frame(
        interval("pytorch", "eager", 10.0), interval("pytorch", "compile", 12.0),
        interval("tensorflow", "graph", 20.0),
        interval("jax", "jit", 10.2), interval("jax", "eager", 3.0, within=False),
        interval("pytorch", "eager", 10.0, seqlen=16), interval("jax", "jit", 5.0, seqlen=16),
        interval("tensorflow", "graph", 20.0, seqlen=32),
    ))


def test_every_framework_against_the_fastest_of_its_cell(three):
    ratios = ratio.against_fastest(three).set_index(["seqlen", "framework"])
    assert ratios.index.tolist() == [(8, "pytorch"), (8, "tensorflow"), (8, "jax"),
                                     (16, "pytorch"), (16, "jax")]  # 32: TensorFlow alone
    assert set(ratios.loc[8, "fastest"]) == {"pytorch"}
    assert set(ratios.loc[16, "fastest"]) == {"jax"}
    slower = ratios.loc[(8, "tensorflow")]
    assert slower["ratio"] == pytest.approx(2.0)
    assert (slower["ratio_low"], slower["ratio_high"]) == pytest.approx((19 / 10.5, 21 / 9.5))
    assert slower["verdict"] == "slower"
    tie = ratios.loc[(8, "jax")]  # its wrong 3 ms answer is no contender
    assert (tie["optimization"], tie["verdict"]) == ("jit", "tie")
    assert tie["text"] == "tie: 1.02 (0.92–1.13) jit"
    assert ratios.loc[(16, "pytorch"), "text"] == "2.00 (1.81–2.21) eager"
    assert ratio.tally(ratios.reset_index()) == {"tie: PyTorch, JAX": 1, "JAX fastest": 1}
    table = ratio.ratio_table(ratios.reset_index())
    assert table.values.tolist() == [
        ["bert, batch 1", "PyTorch", "fastest: eager", "2.00 (1.81–2.21) eager"],
        ["bert, batch 1", "TensorFlow", "2.00 (1.81–2.21) graph", "—"],
        ["bert, batch 1", "JAX", "tie: 1.02 (0.92–1.13) jit", "fastest: jit"]]
    assert ratio.candidates(three) == {"pytorch": ["compile", "eager"],
                                       "tensorflow": ["graph"], "jax": ["jit"]}


def test_the_ratio_heatmap_has_a_row_per_framework(three):
    ratios = ratio.against_fastest(three)
    grid = ratio.ratio_grid(ratios)
    assert grid.index.tolist() == ["bert, batch 1 · PyTorch", "bert, batch 1 · TensorFlow",
                                   "bert, batch 1 · JAX"]
    ax = plots.ratio_heatmap(Figure(figsize=plots.ratio_size(grid)).subplots(), grid,
                             ratio.verdict_grid(ratios), "fp32")
    shown = sorted(t.get_text() for t in ax.texts if t.get_text())
    assert shown == ["2.00", "2.00", "= 1.02", "fastest", "fastest"]


def test_each_framework_has_its_colour_in_the_registrys_order(three):
    colours = [plots.framework_color(name) for name in ("PyTorch", "TensorFlow", "JAX")]
    assert len(set(colours)) == 3 and plots.framework_color("jax") == colours[2]
    assert plots.framework_color("unregistered") == plots.UNKNOWN_COLOR
    figure = plots.latency_vs_length(three, Figure())
    legend = [t.get_text() for t in figure.legends[0].texts]
    assert legend.index("PyTorch") < legend.index("TensorFlow") < legend.index("JAX")
    lines = {line.get_label(): line.get_color() for line in figure.legends[0].get_lines()}
    assert matplotlib.colors.same_color(lines["JAX"], colours[2])


def test_the_answer_has_each_frameworks_best(three):
    answer = headline.winners(three)["inference"].set_index("seqlen")
    assert answer.columns[answer.columns.str.endswith("'s best")].tolist() == [
        "PyTorch's best", "TensorFlow's best", "JAX's best"]
    assert answer.loc[8, "runner-up"] == "JAX jit (fp32)"
    assert answer.loc[8, "by how much"].startswith("tie: 1.02×")
    assert answer.loc[8, "faster but wrong"] == "✗ JAX eager"
    assert answer.loc[16, "fastest"] == "JAX jit"
    assert answer.loc[16, "TensorFlow's best"] == "— (no timing)"
    assert answer.loc[32, "by how much"] == "the only right answer"


def test_the_optimizer_head_to_head_has_every_framework():
    cells = steps.frame(
        steps.cell("pytorch", "eager", "adam", 20.0, 16.0, 4.0),
        steps.cell("pytorch", "fused", "adam", 17.0, 16.0, 1.0),
        steps.cell("tensorflow", "eager", "adam", 100.0, 40.0, 60.0),
        steps.cell("tensorflow", "graph", "adam", 25.0, 15.0, 10.0),
        steps.cell("jax", "jit", "adam", 12.0, 10.0, 2.0),
    )
    text = "\n".join(train_step.seed_answer(cells))
    assert ("took 20.0% of PyTorch's `eager` step, 40.0% of TensorFlow's `graph` step and "
            "16.7% of JAX's `jit` step (medians over the 1 shape that all 3 have)") in text
    assert ("PyTorch's `eager` Adam took 4.00 ms per step, TensorFlow's `graph` Adam 10.0 ms, "
            "JAX's `jit` Adam 2.00 ms: JAX's was the fastest; PyTorch's was 2.0× slower than "
            "JAX's, a difference of 10.0% of PyTorch's step; TensorFlow's was 5.0× slower "
            "than JAX's, a difference of 32.0% of TensorFlow's step.") in text
    assert "PyTorch `fused` 1.00 ms, `eager` 4.00 ms; TensorFlow" in text
    assert "; JAX — optax.adam, inside the jitted step." in text
    assert "C++ kernels in all 3" in text


def test_the_head_to_head_keeps_the_frameworks_that_share_a_shape():
    """JAX measured another length: PyTorch and TensorFlow are compared without it."""
    text = "\n".join(train_step.seed_answer(steps.frame(
        steps.cell("pytorch", "eager", "adam", 20.0, 16.0, 4.0),
        steps.cell("tensorflow", "graph", "adam", 25.0, 15.0, 10.0),
        steps.cell("jax", "jit", "adam", 12.0, 10.0, 2.0, seqlen=32),
    )))
    assert "shape that both have" in text and "JAX" not in text


@pytest.fixture
def jax_libraries(monkeypatch) -> tuple[str, ...]:
    """JAX's libraries in the environment's mapping (as the registry will name them)."""
    if "jax" not in environment.FRAMEWORK_LIBRARIES:
        monkeypatch.setitem(environment.FRAMEWORK_LIBRARIES, "jax", ("jax", "flax"))
    return environment.FRAMEWORK_LIBRARIES["jax"]


def three_environments(jax_libraries, **changes) -> pd.DataFrame:
    """A cell of each framework, each from its own environment."""
    main = jax_libraries[0]
    rows = {"framework": ["pytorch", "tensorflow", "jax", "jax"], "device": ["cpu"] * 4,
            "precision": ["fp32"] * 4, "env_hardware_fingerprint": ["h"] * 4,
            "env_packages_hash": ["p1", "p2", "p3", "p3"],
            "path_torch": ["2.9", None, None, None],
            "path_tensorflow": [None, "2.20", None, None],
            f"path_{main}": [None, None, "0.7", "0.7"],
            f"path_{main}_cuda": [None, None, "12", "12"],
            "path_transformers": ["4.57"] * 4}
    return pd.DataFrame(rows | changes)


def test_the_environment_has_a_group_of_fields_per_framework(jax_libraries):
    main = jax_libraries[0]
    env = environment.environment(three_environments(jax_libraries))
    assert env.disagree == [] and env.notes == ["packages"]
    assert env.table[""].tolist() == ["hardware", "torch", "tensorflow", main,
                                      "transformers", "packages"]  # no CUDA on CPU cells
    labels = [f.label for f in environment.all_fields()]
    assert labels.index("tf-keras") < labels.index(main) < labels.index(f"{main} CUDA")
    differ = environment.environment(three_environments(
        jax_libraries, **{f"path_{main}": [None, None, "0.7", "0.6"]}))
    assert differ.disagree == [main]
    assert differ.table["framework"].tolist().count("JAX") == 2


def test_the_accuracy_match_compares_every_pair():
    """Two frameworks agree, the third trained another model: the group is a mismatch,
    and its difference is the pair that is furthest apart."""
    agree = (("pytorch", "eager", 0.80, None), ("tensorflow", "graph", 0.79, None),
             ("jax", "jit", 0.805, None))
    match = training.accuracy_match(trained_cells(*agree, test_images=10_000)).iloc[0]
    assert match["verdict"] == "match" and match["difference"] == pytest.approx(0.015)
    off = agree[:2] + (("jax", "jit", 0.70, None),)
    mismatch = training.accuracy_match(trained_cells(*off, test_images=10_000))
    assert mismatch.loc[0, "verdict"] == "mismatch"
    assert mismatch.loc[0, "difference"] == pytest.approx(0.10)
    # 99% for the group: each of its three pairs at 1 − 0.01/3.
    expected = norm.ppf(1 - 0.01 / 6) * np.sqrt(0.8 * 0.2 / 10_000 + 0.7 * 0.3 / 10_000)
    assert mismatch.loc[0, "statistical"] == pytest.approx(expected)
    table = training.match_table(mismatch)
    assert [c for c in table if c.endswith("accuracy")] == [
        "PyTorch accuracy", "TensorFlow accuracy", "JAX accuracy"]
    assert table.loc[0, "JAX accuracy"] == "70.0% (1 seed)"
    # The mismatch names JAX: PyTorch and TensorFlow agree without it and stay right.
    assert mismatch.loc[0, "differs"] == ["jax"]
    assert table.loc[0, "verdict"] == "✗ mismatch: JAX differs"
    cells = trained_cells(*off, test_images=10_000).set_index("framework")
    assert cells["accuracy_verdict"].to_dict() == {
        "pytorch": "match", "tensorflow": "match", "jax": "mismatch"}
    assert cells["wrong_answer"].to_dict() == {
        "pytorch": False, "tensorflow": False, "jax": True}
    assert cells.loc[["pytorch", "tensorflow"], "checked"].all()


def test_a_mismatch_that_cannot_tell_which_framework_differs_names_both():
    """Two frameworks apart, nothing to side with: both named. Three, only one pair beyond
    the noise (PyTorch 80%, TensorFlow 76%, JAX 72%, a tolerance of 5 points: each within
    it of the next): PyTorch or JAX could be the one off, so both are named and
    TensorFlow, which mismatches neither, keeps its verdict. Three all apart: all named."""
    apart = (("pytorch", "eager", 0.80, None), ("jax", "jit", 0.70, None))
    two = training.accuracy_match(trained_cells(*apart, test_images=10_000))
    assert two.loc[0, "differs"] == ["pytorch", "jax"]
    assert training.match_table(two).loc[0, "verdict"] == \
        "✗ mismatch: PyTorch and JAX disagree"
    assert trained_cells(*apart, test_images=10_000)["wrong_answer"].all()

    chain = (("pytorch", "eager", 0.80, None), ("tensorflow", "graph", 0.76, None),
             ("jax", "jit", 0.72, None))
    cells = trained_cells(*chain, test_images=10_000, tolerance=0.05).set_index("framework")
    match = training.accuracy_match(cells.reset_index()).iloc[0]
    assert match["verdict"] == "mismatch" and match["differs"] == ["pytorch", "jax"]
    assert cells["accuracy_verdict"].to_dict() == {
        "pytorch": "mismatch", "tensorflow": "match", "jax": "mismatch"}

    spread = (("pytorch", "eager", 0.90, None), ("tensorflow", "graph", 0.80, None),
              ("jax", "jit", 0.70, None))
    all_apart = training.accuracy_match(trained_cells(*spread, test_images=10_000))
    assert all_apart.loc[0, "differs"] == ["pytorch", "tensorflow", "jax"]


def test_the_gpu_and_mixed_precision_prose_lists_every_registered_framework(monkeypatch):
    """One line per registered framework, in the registry's order, each its own
    declaration's words; a framework that declares nothing is listed as such (not left
    out, not described as another)."""
    declared = frameworks.declarations()
    assert [f.name for f in declared] == ["pytorch", "tensorflow", "jax", "onnxruntime"]
    timing, kept = gpu.how_measured(), precision.how_each_framework()
    assert len(timing) == len(kept) == 4
    for framework, line, ops in zip(declared, timing, kept, strict=True):
        assert line.startswith(f"**{framework.label}**: timed {framework.gpu_timing};")
        assert framework.gpu_memory in line
        assert ops == f"**{framework.label}**: {framework.mixed_precision}."
    assert "block_until_ready" in timing[2] and "jaxpr" in kept[2]  # JAX's, not another's
    # A fourth framework that declares nothing.
    import dataclasses

    bare = dataclasses.replace(frameworks.get("jax"), name="other", label="Other",
                               gpu_timing="", gpu_memory="", mixed_precision="")
    monkeypatch.setattr(frameworks, "declarations", lambda: (*declared, bare))
    assert gpu.how_measured()[-1] == ("**Other**: timed not declared by the framework; "
                                     "memory: not declared by the framework.")
    assert precision.how_each_framework()[-1] == "**Other**: not declared by the framework."
