"""The report's answer first, memory against input size, throughput scaling, the reproduce
table and the finished page, on synthetic summaries."""

import json

import matplotlib
import numpy as np
import pytest
from bs4 import BeautifulSoup

from dlbench.analysis import headline, memory, plots_size, scaling
from dlbench.analysis.reproduce import reproduce
from dlbench.catalogue import recipes
from dlbench.format import framework_name
from dlbench.records import provenance
from dlbench.report.page import LONG_WORDS, anchor, finish
from tests.test_analysis import cell, frame

matplotlib.use("Agg")
import matplotlib.pyplot  # noqa: E402 (after the backend; the test run alone has no pyplot)


def timed(framework, optimization, median, *, batch=1, seqlen=8, **extra) -> dict:
    """A timed cell with a ±3% interval and memory phases growing with its input."""
    tokens = batch * seqlen
    return cell(framework, optimization, median, batch=batch, seqlen=seqlen,
                median_ci95_ms_low=median * 0.97, median_ci95_ms_high=median * 1.03,
                resident_after_model_mb=500.0, steady_peak_mb=500.0 + 2.0 * tokens,
                **extra)


@pytest.fixture
def cells():
    return frame(
        timed("pytorch", "eager", 10.0), timed("pytorch", "torchscript", 5.0),
        timed("tensorflow", "graph", 4.0), timed("tensorflow", "eager", 20.0),
        # batch 2: the fastest answer is wrong; graph against eager-bf16 is 1.125×.
        timed("pytorch", "torchscript", 6.0, batch=2, within=False, rel_error=0.3),
        timed("tensorflow", "graph", 8.0, batch=2), timed("pytorch", "eager-bf16", 9.0, batch=2),
        cell("tensorflow", "eager", status="oom", reason="out of memory", batch=2),
        # length 32: a tie (19.5 against 20.0, ±3% each).
        timed("pytorch", "eager", 20.0, seqlen=32), timed("tensorflow", "graph", 19.5, seqlen=32),
        # batch 4: the only cell, and its answer is wrong.
        timed("pytorch", "eager", 30.0, batch=4, within=False),
        cell("pytorch", "compile", status="error", reason="RuntimeError: boom"),
        cell("pytorch", "graph", status="unsupported",
             reason="optimization 'graph' does not exist in PyTorch (only in TensorFlow)"),
        cell("tensorflow", "xla", status="unsupported", reason="needs a GPU"),
        timed("pytorch", "eager", 12.0, batch=2, flags_unstable=True,
              flags_reasons="unstable: IQR is 30% of the median"),
    )


def test_the_fastest_right_answer_by_how_much_with_ties(cells):
    answer = headline.winners(cells)["inference"].set_index(["batch", "seqlen"])
    first = answer.loc[1, 8]
    assert (first["fastest"], first["precision"], first["correct"]) == (
        "TensorFlow graph", "fp32", "✓")
    # 5.0 / 4.0 = 1.25, interval [5 × 0.97 / (4 × 1.03), 5 × 1.03 / (4 × 0.97)].
    assert first["by how much"] == "1.25× (1.18–1.33)"
    assert first["runner-up"] == "PyTorch torchscript (fp32)"
    second = answer.loc[2, 8]
    assert (second["fastest"], second["by how much"]) == ("TensorFlow graph", "1.12× (1.06–1.19)")
    assert second["runner-up"] == "PyTorch eager-bf16 (bf16)"
    assert second["faster but wrong"] == "✗ PyTorch torchscript"
    assert answer.loc[1, 32]["by how much"].startswith("tie: 1.03×")
    assert answer.loc[4, 8]["fastest"] == "— (no right answer)"
    assert "scenario" not in answer  # one table per scenario: no column for it


def test_an_output_compared_but_not_judged_is_said_so():
    """A bf16 generation's tokens are compared with the reference but not required to equal
    them: the answer says so, not 'not checked' (nothing compared) nor ✓."""
    compared = {"correctness_within_tolerance": None, "correctness_reference": "PyTorch eager",
                "correctness_share_equal": 0.67}
    answer = headline.winners(frame(
        timed("pytorch", "eager-bf16", 10.0, within=None, **compared),
        timed("tensorflow", "eager", 12.0, within=None)))["inference"]
    assert answer.loc[0, "correct"] == "compared, not judged"
    unchecked = headline.winners(frame(timed("pytorch", "eager", 10.0, within=None),
                                       timed("tensorflow", "eager", 12.0)))["inference"]
    assert unchecked.loc[0, "correct"] == "not checked"


def test_unequal_recipes_are_said_beside_the_verdict(cells):
    """A note where one framework's right answers include a compiled recipe and the
    other's do not; none where both have one, or neither has."""
    answer = headline.winners(cells)["inference"].set_index(["batch", "seqlen"])
    note = answer[headline.UNEQUAL]
    assert note[1, 8] == ""  # PyTorch torchscript against TensorFlow graph: like for like
    # Length 32: PyTorch ran eager only; batch 2: its torchscript answer was wrong.
    unequal = "⚠ unequal: PyTorch eager only; TensorFlow compiled (graph)"
    assert note[1, 32] == unequal and note[2, 8] == unequal
    assert note[4, 8] == ""  # no right answer: nothing compared
    both_eager = headline.winners(frame(timed("pytorch", "eager", 10.0),
                                        timed("tensorflow", "eager", 12.0)))["inference"]
    assert headline.UNEQUAL not in both_eager  # no row has a note: no empty column
    compiled_only = headline.winners(frame(
        timed("pytorch", "eager", 10.0), timed("tensorflow", "xla", 12.0),
        timed("tensorflow", "eager", 14.0)))["inference"]
    assert compiled_only.loc[0, headline.UNEQUAL] == (
        "⚠ unequal: PyTorch eager only; TensorFlow compiled (xla)")
    # A recipe of unknown kind (not in the registry) says nothing either way.
    unknown = headline.winners(frame(timed("pytorch", "mystery", 10.0),
                                     timed("tensorflow", "graph", 12.0)))["inference"]
    assert headline.UNEQUAL not in unknown


def test_unequal_attention_is_said_beside_the_verdict():
    """PyTorch's SDPA against the others' explicit attention is not the same work: said
    beside the verdict (with the recipes' note where there is one); one implementation in
    every framework says nothing."""
    def attention(row: dict, name: str) -> dict:
        return {**row, "attention_implementation": name}

    mixed = headline.winners(frame(attention(timed("pytorch", "eager", 10.0), "sdpa"),
                                   attention(timed("tensorflow", "eager", 12.0), "eager"),
                                   attention(timed("jax", "eager", 11.0), "eager")))["inference"]
    assert mixed.loc[0, headline.UNEQUAL] == (
        "⚠ unequal attention: PyTorch sdpa; TensorFlow eager; JAX eager")
    both = headline.winners(frame(attention(timed("pytorch", "eager", 10.0), "sdpa"),
                                  attention(timed("tensorflow", "graph", 12.0), "eager")))
    assert both["inference"].loc[0, headline.UNEQUAL] == (
        "⚠ unequal: PyTorch eager only; TensorFlow compiled (graph) · "
        "⚠ unequal attention: PyTorch sdpa; TensorFlow eager")
    alike = headline.winners(frame(attention(timed("pytorch", "eager", 10.0), "eager"),
                                   attention(timed("tensorflow", "eager", 12.0), "eager")))
    assert headline.UNEQUAL not in alike["inference"]


def test_an_sdpa_recipe_beside_the_explicit_attention_is_not_the_answer():
    """PyTorch's eager-sdpa is faster, but TensorFlow has the explicit attention only: the
    answer and the frameworks' comparison set PyTorch's explicit attention against it
    (nothing unequal to say), and eager-sdpa shows what SDPA pays in its speed-up over
    PyTorch eager. A run whose PyTorch cells all ran SDPA is compared as it is, and says
    so."""
    from dlbench.analysis import ratio

    def attention(row: dict, name: str) -> dict:
        return {**row, "attention_implementation": name}

    cells = frame(attention(timed("pytorch", "eager", 10.0), "eager"),
                  attention(timed("pytorch", "eager-sdpa", 6.0), "sdpa"),
                  attention(timed("tensorflow", "graph", 12.0), "eager"),
                  attention(timed("tensorflow", "eager", 13.0), "eager"))
    answer = headline.winners(cells)["inference"].loc[0]
    assert answer["fastest"] == "PyTorch eager"
    assert answer[headline.best_of("pytorch")].startswith("eager (fp32): 10")
    assert headline.UNEQUAL not in answer or "attention" not in answer[headline.UNEQUAL]
    compared = ratio.against_fastest(cells)
    assert compared.set_index("framework").loc["pytorch", "optimization"] == "eager"
    sdpa = cells.set_index("optimization").loc["eager-sdpa"]
    assert sdpa["speedup"] == pytest.approx(10.0 / 6.0)
    # PyTorch's explicit attention wrong, its SDPA right: the common attention is the
    # right answers' — none — so PyTorch's SDPA competes, and the answer says so.
    wrong_explicit = headline.winners(frame(
        attention(timed("pytorch", "eager", 10.0, within=False), "eager"),
        attention(timed("pytorch", "eager-sdpa", 6.0), "sdpa"),
        attention(timed("tensorflow", "graph", 12.0), "eager")))["inference"].loc[0]
    assert wrong_explicit["fastest"] == "PyTorch eager-sdpa"
    assert "⚠ unequal attention" in wrong_explicit[headline.UNEQUAL]
    # The other way: SDPA only in PyTorch, nothing in common.
    unequal = headline.winners(frame(
        attention(timed("pytorch", "eager-sdpa", 6.0), "sdpa"),
        attention(timed("tensorflow", "graph", 12.0), "eager")))["inference"].loc[0]
    assert unequal["fastest"] == "PyTorch eager-sdpa"
    assert "⚠ unequal attention: PyTorch sdpa; TensorFlow eager" in unequal[headline.UNEQUAL]


def test_the_kind_of_a_recipe_comes_from_its_registry():
    kinds = {(scenario, name): headline.kind(scenario, name) for scenario, name in [
        ("inference", "eager"), ("inference", "eager-bf16"), ("inference", "torchscript"),
        ("inference", "compile-max-autotune"), ("inference", "graph"), ("inference", "xla"),
        ("training", "eager"), ("training", "channels-last"), ("training", "fused"),
        ("training", "compile-step"), ("training", "graph-bf16"), ("train_step", "xla"),
        ("train_step", "legacy-optimizer"), ("inference", "nonsense"), ("echo", "eager")]}
    assert {k for k, v in kinds.items() if v == "compiled"} == {
        ("inference", "torchscript"), ("inference", "compile-max-autotune"),
        ("inference", "graph"), ("inference", "xla"), ("training", "compile-step"),
        ("training", "graph-bf16"), ("train_step", "xla")}
    assert kinds["inference", "nonsense"] is None and kinds["echo", "eager"] is None
    # A recipe named alike in several scenarios or frameworks is of one kind.
    kinds_of: dict[str, set[str]] = {}
    for scenario in ("inference", "training", "train_step"):
        for name, known in recipes.optimizations(scenario).items():
            for framework in known.frameworks:
                kind = recipes.optimization(scenario, name, framework).recipe.kind
                kinds_of.setdefault(name, set()).add(kind)
    assert {"eager", "compile", "graph", "xla"} <= set(kinds_of)
    assert {n: k for n, k in kinds_of.items() if len(k) > 1} == {}


def test_each_framework_best_beside_the_winner():
    """The winner and the runner-up are both PyTorch: TensorFlow's best still shows, and a
    third framework gets its own column (the frameworks are not two fixed names)."""
    answer = headline.winners(frame(
        timed("pytorch", "torchscript", 4.0), timed("pytorch", "eager", 5.0),
        timed("tensorflow", "graph", 8.0), timed("tensorflow", "eager", 9.0),
        timed("jax", "eager", 6.0, within=False)))["inference"].iloc[0]
    assert (answer["fastest"], answer["runner-up"]) == ("PyTorch torchscript",
                                                        "PyTorch eager (fp32)")
    assert answer["PyTorch's best"] == "torchscript (fp32): 4.000 ms, the fastest"
    # 8 / 4 = 2, interval [8 × 0.97 / (4 × 1.03), 8 × 1.03 / (4 × 0.97)].
    assert answer["TensorFlow's best"] == "graph (fp32): 8.000 ms, 2.00× (1.88–2.12)"
    assert answer["JAX's best"] == "— (wrong answers only)"
    assert headline.UNEQUAL not in answer  # jax has no right answer: not compared


def test_a_trained_cell_whose_accuracy_match_is_undecided_says_so():
    """The accuracy match was run and reached no verdict (2 seeds, in the default run):
    'accuracy undecided', not 'not checked', which the page contradicted; ✓ for a match."""
    from types import SimpleNamespace

    undecided = SimpleNamespace(checked=False, accuracy_verdict="undecided")
    assert headline._correct(undecided) == "accuracy undecided"
    assert headline._correct(SimpleNamespace(checked=True, accuracy_verdict="match")) == "✓"
    assert headline._correct(SimpleNamespace(checked=False, accuracy_verdict=None)) == \
        "not checked"


def test_one_answer_per_scenario_without_empty_columns(cells):
    """Inference and training cells in one summary: a table each, with only that
    scenario's sizes, as integers; nothing prints 'nan'."""
    training = {"scenario": "training", "seqlen": np.nan, "dataset": "synthetic",
                "pipeline": "w0", "optimizer": "sgd", "model": "cnn", "within": None}
    mixed = frame(*(row for row in cells.to_dict("records") if row["status"] == "ok"),
                  timed("pytorch", "eager", 50.0, batch=64, **training),
                  timed("tensorflow", "graph", 40.0, batch=64, **training))
    assert mixed["seqlen"].dtype == float  # NaN for the training cells
    answers = headline.winners(mixed)
    assert list(answers) == ["inference", "training"]
    inference, trained = answers["inference"], answers["training"]
    assert list(inference.columns[:3]) == ["model", "batch", "seqlen"]
    assert not {"dataset", "pipeline", "optimizer"} & set(inference.columns)
    assert list(trained.columns[:5]) == ["model", "batch", "dataset", "pipeline", "optimizer"]
    assert "seqlen" not in trained and "faster but wrong" not in trained
    assert inference["seqlen"].tolist() == [8, 32, 8, 8]
    assert str(inference["seqlen"].dtype) == "int64" and trained["batch"].tolist() == [64]
    assert trained.iloc[0]["correct"] == "not checked"
    for table in answers.values():
        html = table.style.hide(axis="index").to_html()
        assert "nan" not in html.lower() and ".000000" not in html


def test_cells_that_need_a_look_are_counted_once(cells):
    counts = headline.attention(cells).set_index("kind")
    assert counts["cells"].to_dict() == {
        "unstable or flagged": 1, "wrong answer": 2, "failed (error)": 1, "out of memory": 1,
        "unsupported": 1, "not applicable by design": 1}
    assert counts.loc["unstable or flagged", "section"] == headline.QUALITY


def test_memory_against_input_size_marks_out_of_memory(cells):
    table = memory.against_size(cells).set_index(["batch", "length"])
    assert table.loc[(2, 8), "batch × length"] == 16
    assert table.loc[(2, 8), "TensorFlow eager"] == "OOM"
    assert table.loc[(2, 8), "TensorFlow graph"] == "532"  # 500 + 2 × 16
    assert table.loc[(1, 32), "TensorFlow eager"] == ""
    assert memory.against_size(cells, "device_steady_peak_mb") is None


def test_memory_per_thousand_tokens(cells):
    table = memory.per_token(cells[cells["timed"]]).set_index(["framework", "optimization"])
    # Every cell costs 2 MiB per token: 2,000 per 1k tokens, from three sizes up.
    assert table.loc[("TensorFlow", "graph"), "MiB per 1k tokens"] == "2,000.0"
    assert cells[cells["timed"] & cells["optimization"].eq("torchscript")][
        ["batch", "seqlen"]].drop_duplicates().shape[0] == 2
    assert table.loc[("PyTorch", "torchscript"), "MiB per 1k tokens"] == "—"


def test_memory_per_token_is_the_growth_not_a_fixed_part_spread_over_the_input():
    """PyTorch holds 300 MiB of its own over the model whatever the input, and 2 MiB per
    token beyond it; TensorFlow nothing of its own and 5 MiB per token. Per 1,000 tokens is
    the growth — 2,000 for PyTorch, 5,000 for TensorFlow — where steady − model over the
    input said 39,500 for PyTorch at 8 tokens and 6,688 at 64 (their median: 11,375). A
    framework measured at one size has no growth to tell."""
    def measured(framework, batch, seqlen, fixed, per_token):
        tokens = batch * seqlen
        return cell(framework, "eager", 10.0, batch=batch, seqlen=seqlen,
                    resident_after_model_mb=500.0,
                    steady_peak_mb=500.0 + fixed + per_token * tokens)

    sizes = [(1, 8), (2, 8), (4, 8), (1, 32), (2, 32)]
    table = memory.per_token(frame(
        *(measured("pytorch", b, s, 300.0, 2.0) for b, s in sizes),
        *(measured("tensorflow", b, s, 0.0, 5.0) for b, s in sizes),
        measured("jax", 1, 8, 300.0, 2.0))).set_index("framework")
    assert table.loc["PyTorch", "MiB per 1k tokens"] == "2,000.0"
    assert table.loc["PyTorch", "±"] == "0.0"  # a line through every cell
    assert table.loc["TensorFlow", "MiB per 1k tokens"] == "5,000.0"
    assert table.loc["PyTorch", "model resident"] == "500.0"
    assert table.loc[framework_name("jax"), "MiB per 1k tokens"] == "—"


def test_memory_per_token_needs_three_sizes_and_a_growth_beyond_the_noise():
    """Fresh processes of one cell hold a few MiB more or less of their own: through two
    sizes a line turns that into any slope, a negative one too, so two give none; from
    three, the slope comes with its 95% interval, and where the interval holds zero the
    table says only how much it could be at most, never a memory that shrinks as the input
    grows."""
    def measured(framework, batch, seqlen, input_mb):
        return cell(framework, "eager", 10.0, batch=batch, seqlen=seqlen,
                    resident_after_model_mb=500.0, steady_peak_mb=500.0 + input_mb)

    table = memory.per_token(frame(
        measured("jax", 1, 16, 55.3), measured("jax", 1, 64, 52.9),  # two sizes
        # 1 MiB per token, ± a MiB: 1,000 per 1k, an interval that excludes zero
        measured("pytorch", 1, 16, 66.0), measured("pytorch", 1, 64, 116.0),
        measured("pytorch", 2, 64, 177.0),
        # no growth, a few MiB of noise: at most the interval's upper end
        measured("tensorflow", 1, 16, 55.0), measured("tensorflow", 1, 64, 51.0),
        measured("tensorflow", 2, 64, 57.0))).set_index("framework")
    assert table.loc[framework_name("jax"), "MiB per 1k tokens"] == "—"
    grows = table.loc["PyTorch"]
    slope = 1000 * np.polyfit([16, 64, 128], [66.0, 116.0, 177.0], 1)[0]
    assert grows["MiB per 1k tokens"] == f"{slope:,.1f}"
    assert 0 < float(grows["±"].replace(",", "")) < slope
    flat = table.loc["TensorFlow", "MiB per 1k tokens"]
    assert flat.startswith("≤ ") and float(flat[2:].replace(",", "")) > 0
    assert not any(str(v).startswith("-") or str(v).startswith("−")
                   for v in table.to_numpy().ravel())
    two = frame(measured("jax", 1, 16, 55.3), measured("jax", 1, 64, 52.9))
    assert memory.sizes_of_their_own(two) == 2 and not memory.estimated(memory.per_token(two))
    assert memory.estimated(table.reset_index())
    # Three sizes whose memory falls clearly as the input grows: no figure, a mark.
    falls = memory.per_token(frame(measured("jax", 1, 16, 90.0), measured("jax", 1, 64, 66.5),
                                   measured("jax", 2, 64, 34.0)))
    assert falls.iloc[0]["MiB per 1k tokens"] == memory.FALLS
    # On a GPU the allocator's figures are each cell's own whatever came before it in its
    # process: a growth from them where the host's are borrowed (blank).
    def on_gpu(batch, seqlen, gpu_input_mb):
        return cell("pytorch", "eager", 10.0, batch=batch, seqlen=seqlen, device="gpu",
                    device_resident_after_model_mb=400.0,
                    device_steady_peak_mb=400.0 + gpu_input_mb)

    gpu = memory.per_token(frame(on_gpu(1, 16, 8.0), on_gpu(1, 64, 32.0), on_gpu(2, 64, 64.0)))
    assert gpu.iloc[0]["MiB per 1k tokens"] == "—"
    assert gpu.iloc[0]["GPU MiB per 1k tokens"] == "500.0"
    assert memory.estimated(gpu)


def test_throughput_carries_the_interval(cells):
    points = scaling.throughput(cells[cells["timed"]])
    assert len(points) == 9  # the 11 timed cells but the 2 wrong answers
    assert not (points["line"].eq("PyTorch torchscript") & points["batch"].eq(2)).any()
    row = points[points["line"].eq("TensorFlow graph") & points["batch"].eq(2)].iloc[0]
    assert row["samples_s"] == pytest.approx(250.0)  # 2 samples in 8 ms
    assert row["samples_s_low"] == pytest.approx(2000 / 8.24)
    assert row["tokens_s_high"] == pytest.approx(16000 / 7.76)
    held, other, value = scaling.series(points, "seqlen")
    assert (other, value) == ("batch", 1) and set(held["batch"]) == {1}
    table = scaling.table(points).set_index(["batch", "length"])
    assert table.loc[(2, 8), "TensorFlow graph"] == "250 (243–258)"
    # A time whose interval reaches 0 (two processes far apart) bounds the rate from
    # below only: no upper bound, never a negative or infinite one.
    cells = cells.assign(headline_ci95_ms_low=cells["headline_ci95_ms_low"].where(
        ~(cells["framework"].eq("tensorflow") & cells["optimization"].eq("graph")), 0.0))
    row = scaling.throughput(cells[cells["timed"]]).query("line == 'TensorFlow graph'").iloc[0]
    assert row["samples_s_low"] > 0 and np.isnan(row["samples_s_high"])


def test_size_figures_draw(cells):
    figure = plots_size.memory_vs_size(cells, matplotlib.pyplot.figure())
    assert figure.axes[0].get_xlabel().startswith("input size")
    figure = plots_size.throughput_vs_size(scaling.throughput(cells[cells["timed"]]),
                                           matplotlib.pyplot.figure())
    assert [ax.get_ylabel() for ax in figure.axes] == ["throughput (samples/s)",
                                                      "throughput (tokens/s)"]


def test_reproduce_from_the_provenance(cells, tmp_path):
    cells = cells.assign(env_git_commit="abc123", env_fingerprint="f1", env_packages_hash=np.where(
        cells["framework"].eq("pytorch"), "p1", "t1"))
    provenance.write(tmp_path / provenance.NAME, {"frameworks": ["pytorch"]}, ["my.yaml"])
    recorded = provenance.read(tmp_path / "summary.parquet")
    assert recorded["pins_hash"] == provenance.pins_hash() and len(recorded["pins_hash"]) == 16
    again = reproduce(cells, recorded)
    assert again.config == "frameworks: [pytorch]\n"
    assert again.command.endswith("snakemake --cores all --configfile config.yaml")
    values = dict(again.table.values.tolist())
    assert values["cells' git commit"] == "abc123"
    assert values["installed packages hash (PyTorch)"] == "p1"
    assert values["config files given"] == "my.yaml"
    assert reproduce(cells, None).command is None
    assert provenance.read(tmp_path / "elsewhere" / "summary.parquet") is None
    json.dumps(recorded)


def test_the_page_is_offline_with_contents_and_print_style():
    html = ('<html><head><script src="https://cdn.example/require.js"></script>'
            '<link rel="stylesheet" href="//cdn.example/x.css"></head><body>'
            '<h1 id="Title">Title</h1><nav id="contents"></nav><h2 id="A-b">A b</h2>'
            '<div><h2>Made by output</h2></div><h1>Part two</h1><h2>C</h2>'
            '<img src="data:image/png;base64,xx"></body></html>')
    page = finish(html)
    assert "cdn.example" not in page and "data:image/png" in page
    assert "@media print" in page
    for title in ("A b", "Made by output", "Part two", "C"):
        assert f'href="#{anchor(title)}"' in page and f'id="{anchor(title)}"' in page
    assert 'href="#Title"' not in page  # the title is not its own entry


def test_long_words_in_table_cells_can_break():
    """A table cell holding a cell id or a path may break it anywhere (its text unchanged);
    cells of shorter words and numbers, and text outside tables, may not."""
    page = BeautifulSoup(finish(
        "<html><head></head><body><p>training_pytorch_cnn_cpu_b64_synthetic_w0</p><table>"
        "<tr><th>a_b</th><td class='data'>training_pytorch_cnn_cpu_b64_synthetic_w0 short</td>"
        "<td><code>/tmp/some/folder/summary.parquet</code></td><td>1,234,567.891</td></tr>"
        "</table></body></html>"), "html.parser")
    assert [cell.get("class") for cell in page.find_all(["td", "th"])] == [
        None, ["data", LONG_WORDS], [LONG_WORDS], None]
    assert page.find("td").get_text() == "training_pytorch_cnn_cpu_b64_synthetic_w0 short"
    assert page.find("p").get("class") is None
    assert f"td.{LONG_WORDS}, th.{LONG_WORDS} {{ overflow-wrap: anywhere;" in str(page)


def test_an_answer_resting_on_a_flagged_cell_says_so():
    """A verdict between the fastest and the runner-up names the flagged one of them; with
    neither flagged (a flagged third cell does not count) the column is left out."""
    unstable = {"flags_unstable": True, "flags_noisy_machine": False}
    steady = {"flags_unstable": False, "flags_noisy_machine": False}
    flagged_second = headline.winners(frame(
        timed("pytorch", "eager", 4.0, **steady), timed("tensorflow", "graph", 5.0, **unstable),
        timed("tensorflow", "eager", 9.0, **steady)))["inference"].iloc[0]
    assert flagged_second[headline.RESTS_ON] == (
        "⚑ rests on flagged cells: TensorFlow graph (see Measurement quality)")
    clean = headline.winners(frame(
        timed("pytorch", "eager", 4.0, **steady), timed("tensorflow", "graph", 5.0, **steady),
        timed("tensorflow", "eager", 9.0, **unstable)))["inference"]
    assert headline.RESTS_ON not in clean


def test_training_is_ranked_by_the_wall_time_per_step_not_the_median_step():
    """The H100's two CNN cells fed by 2 loader workers: steps that wait for a batch or
    find one ready are bimodal, so eager's median (4.9 ms) sat in the fast cluster and
    cudnn-benchmark's (9.1 ms) between the two, while the images over the wall time were
    6,502 against 5,105 per second. The answer and the speed-up follow the wall time: the
    verdict comes out the other way from the medians' (1.85×), not as a tie."""
    def trained(optimization, median, per_s, interval=None):
        wall = 64e3 / per_s
        low, high = interval or (wall * 0.8, wall * 1.2)
        return cell("pytorch", optimization, median, scenario="training", batch=64,
                    seqlen=np.nan, median_ci95_ms_low=median * 0.8,
                    median_ci95_ms_high=median * 2.8, samples_per_s=per_s,
                    wall_step_ms=wall, wall_step_ms_ci95_low=low,
                    wall_step_ms_ci95_high=high, within=None)

    cells = frame(trained("eager", 4.907, 6502.1), trained("cudnn-benchmark", 9.058, 5105.1))
    rows = cells.set_index("optimization")
    assert rows.loc["eager", "headline_ms"] == pytest.approx(64e3 / 6502.1)
    assert rows.loc["cudnn-benchmark", "speedup"] == pytest.approx(5105.1 / 6502.1)
    answer = headline.winners(cells)["training"].iloc[0]
    assert answer["fastest"] == "PyTorch eager"
    assert answer[headline.WALL] == "9.843"
    assert headline.MEDIAN not in answer
    assert answer["by how much"].startswith("tie: 1.27×")  # ±20% a side: wide
    narrow = frame(trained("eager", 4.907, 6502.1, (9.6, 10.1)),
                   trained("cudnn-benchmark", 9.058, 5105.1, (12.2, 12.9)))
    assert headline.winners(narrow)["training"].iloc[0]["by how much"].startswith("1.27×")
    # A cell recorded before the wall time (none here): the whole scenario is compared by
    # its medians, never one cell's wall time against another's median.
    older = trained("cudnn-benchmark", 9.058, 5105.1)
    older["wall_step_ms"] = np.nan
    mixed = frame(trained("eager", 4.907, 6502.1), older)
    assert not mixed["headline_wall"].any()
    assert headline.winners(mixed)["training"].iloc[0][headline.MEDIAN] == "4.907"
