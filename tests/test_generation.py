"""The generation scenario: its config answered clearly, its cells and their reasons, the
token-for-token check, and tiny-gpt2 cells through `dlbench run` with the shared weights
and the reference's ids (a planted wrong answer fails the check; the generation workflow's
cells get the same checks, tests/test_generation_workflow.py)."""

import math
import statistics
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from dlbench.catalogue import frameworks, recipes
from dlbench.measure.decoder import HEAD_ON_LAST_POSITION
from dlbench.plan import config
from dlbench.plan.matrix import expand_cells
from dlbench.records import result
from dlbench.scenarios.generation import FIRST_TOKEN, compare_ids
from tests.conftest import one_framework, tool_env

BATCH, PROMPT, NEW = 2, 8, 4
QUICK = ["--warmup-iterations=1", "--min-duration-s=0.05", "--min-iterations=5"]
SECTION = {"models": ["tiny-gpt2"], "batch_sizes": [BATCH], "prompt_lengths": [PROMPT],
           "new_tokens": [NEW], "optimizations": ["eager"]}


def generation_config(**changes) -> dict:
    return {"frameworks": ["pytorch", "tensorflow"], "devices": ["cpu"],
            "generation": {**SECTION, **changes}}


def problems(**changes) -> str:
    with pytest.raises(config.ConfigError) as caught:
        config.validate(generation_config(**changes))
    return str(caught.value)


# -- the config and the matrix -----------------------------------------------------------


def test_a_generation_section_expands_into_cells_with_readable_ids():
    cells = expand_cells(config.validate(generation_config(
        optimizations={"pytorch": ["eager", "compile-bf16"], "tensorflow": ["xla"]})))
    assert [c.id for c in cells] == [
        "generation_pytorch_tiny-gpt2_cpu_b2_p8_n4_eager",
        "generation_pytorch_tiny-gpt2_cpu_b2_p8_n4_compile-bf16",
        "generation_tensorflow_tiny-gpt2_cpu_b2_p8_n4_xla"]
    assert all(c.unsupported_reason() is None for c in cells)


@pytest.mark.parametrize(("changes", "expected"), [
    ({"new_tokens": [1]}, "new_tokens [1]: at least 2"),
    ({"new_tokens": [0]}, "'generation.new_tokens[0]': 0 is not allowed; it must be a "
                          "positive integer"),
    ({"prompt_lengths": []}, "'generation.prompt_lengths' is empty"),
    ({"optimizations": ["torchscript"]}, "'torchscript' is not allowed; allowed values: "
                                         "eager, eager-bf16, static-cache"),
    ({"models": ["gpt3"]}, "'gpt3' is not allowed (did you mean 'gpt2'?)"),
])
def test_bad_generation_configs_are_answered_clearly(changes, expected):
    assert expected in problems(**changes)


def test_a_missing_axis_is_named():
    section = dict(SECTION)
    del section["new_tokens"]
    with pytest.raises(config.ConfigError, match="new_tokens"):
        config.validate({"frameworks": ["pytorch"], "devices": ["cpu"], "generation": section})


def test_cells_that_cannot_generate_say_why():
    cells = expand_cells(config.validate(generation_config(
        models=["tiny-gpt2", "tiny-bert"], prompt_lengths=[8, 62],
        optimizations={"pytorch": ["eager", "xla"], "tensorflow": ["eager", "static-cache"]})))
    reasons = {c.id: c.unsupported_reason() for c in cells}
    assert "is not a decoder" in reasons["generation_pytorch_tiny-bert_cpu_b2_p8_n4_eager"]
    # tiny-gpt2 has 64 positions: 62 + 4 do not fit
    assert "62 + 4 new tokens exceeds tiny-gpt2's maximum of 64" in \
        reasons["generation_pytorch_tiny-gpt2_cpu_b2_p62_n4_eager"]
    assert "TensorFlow" in reasons["generation_pytorch_tiny-gpt2_cpu_b2_p8_n4_xla"]
    assert "PyTorch" in reasons["generation_tensorflow_tiny-gpt2_cpu_b2_p8_n4_static-cache"]
    assert reasons["generation_tensorflow_tiny-gpt2_cpu_b2_p8_n4_eager"] is None


def test_every_framework_declares_generation_recipes():
    names = recipes.optimizations("generation")
    assert {"eager", "static-cache", "compile", "graph", "xla", "jit"} <= set(names)
    assert {f"{n}-bf16" for n in ("eager", "static-cache", "compile", "xla", "jit")} <= set(names)
    assert names["compile"].recipe.kind == "compiled"


# -- the token check -------------------------------------------------------------------------


def test_tokens_per_second_has_no_upper_bound_where_the_latency_interval_reaches_zero():
    """Two processes far apart: the latency's interval stops at 0 (measure.stats), and the
    rate has no upper bound there (None in the record), not a division by zero."""
    from dlbench.scenarios.generation import _tokens_interval

    assert _tokens_interval(64, {"median_ci95_ms": [100.0, 200.0]}) == [320.0, 640.0]
    assert _tokens_interval(64, {"median_ci95_ms": [0.0, 200.0]}) == [320.0, None]


def test_rounds_pool_the_first_token_and_the_time_per_token_of_every_process():
    """Two processes of one cell (rounds, or repeats): the time to the first token and per
    token come from both processes, as the whole generation's figure does — not from the
    first process alone (the default run's JAX generation: 15.67 ms a token from
    its first round, 14.53 in its second, beside a whole-generation median of both). So do
    the decoding steps' stamps, each position's time the rounds' median (PyTorch eager's
    figure by position showed its first round's 23.6-24.8 ms beside a table's 26.19, its
    second round 28.5)."""
    from dlbench import scenarios
    from dlbench.measure.stats import summarize
    from tests.test_measurement import repeat_record

    params = {"scenario": "generation", "framework": "jax", "model": "tiny-gpt2",
              "device": "cpu", "batch": 1, "seqlen": 8, "new_tokens": 4, "optimization": "jit"}
    records = []
    for whole, first in ((100.0, 10.0), (90.0, 9.0)):
        record = repeat_record([whole, whole + 1, whole + 2])
        per_token = [(x - first) / 3 for x in record["timing"]["samples_ms"]]
        record |= {"params": params, "generation": {
            "first_token": {**summarize([first] * 3), "samples_ms": [first] * 3},
            "per_token": {**summarize(per_token), "samples_ms": per_token},
            "first_token_ms": first, "per_token_ms": statistics.median(per_token),
            "per_position_ms": [whole / 4, whole / 5, whole / 6],
            "per_position_p90_ms": [whole / 3] * 3,
            "steps": {"first_token_ms": first, "per_token_ms": whole / 5}}}
        records.append(record)
    combined = scenarios.get("generation").combine(records)["generation"]
    assert combined["per_position_ms"] == pytest.approx([23.75, 19.0, 95 / 6])
    assert combined["per_position_p90_ms"] == pytest.approx([95 / 3] * 3)
    assert combined["steps"] == pytest.approx({"first_token_ms": 9.5, "per_token_ms": 19.0})
    assert combined["first_token"]["samples_ms"] == [10.0] * 3 + [9.0] * 3
    # The figures the tables show: the processes' geometric mean, as the answer's whole
    # generation is, each process's beside it.
    assert combined["first_token_ms"] == pytest.approx(math.sqrt(10.0 * 9.0))
    assert combined["rounds_first_token_ms"] == [10.0, 9.0]
    own = [r["generation"]["per_token_ms"] for r in records]
    assert combined["per_token_ms"] == pytest.approx(math.sqrt(own[0] * own[1]))
    assert combined["rounds_per_token_ms"] == own
    assert records[0]["generation"]["first_token_ms"] == 10.0  # the repeats left alone
    # A process without a time per token (not above zero): none for the cell, with why.
    records[1]["generation"] |= {"per_token_ms": None, "per_token_note": "not resolved: …"}
    unresolved = scenarios.get("generation").combine(records)["generation"]
    assert unresolved["per_token_ms"] is None
    assert unresolved["per_token_note"] == "not resolved: …"


def test_the_token_check_finds_the_first_divergence():
    reference = np.arange(12).reshape(2, 6)
    same = compare_ids(reference.copy(), reference, "ref.npz", "fp32")
    assert same["within_tolerance"] is True and same["first_divergence"] is None
    other = reference.copy()
    other[1, 3:] += 1
    diverged = compare_ids(other, reference, "ref.npz", "fp32")
    assert diverged["within_tolerance"] is False
    assert diverged["first_divergence"] == 3 and diverged["first_divergence_per_row"] == [None, 3]
    assert diverged["share_equal"] == pytest.approx(9 / 12)
    reduced = compare_ids(other, reference, "ref.npz", "bf16")  # recorded, not judged
    assert reduced["within_tolerance"] is None and reduced["first_divergence"] == 3
    assert not reduced["required"] and "not judged" in reduced["note"]


# -- one cell per framework, for real -------------------------------------------------------


@pytest.fixture(scope="module")
def shared(tmp_path_factory) -> tuple[str, str]:
    """tiny-gpt2's seeded weights and the reference's ids, as the workflow's rules make
    them."""
    folder = tmp_path_factory.mktemp("generation")
    weights = folder / "tiny-gpt2" / "model.safetensors"
    reference = folder / "tiny-gpt2" / f"generation_b{BATCH}_p{PROMPT}_n{NEW}.npz"
    for command in (["weights"], ["generation", f"--batch={BATCH}", f"--seqlen={PROMPT}",
                                  f"--new-tokens={NEW}", f"--weights={weights}"]):
        subprocess.run([sys.executable, "-m", "dlbench.reference", *command,
                        "--model=tiny-gpt2", "--threads=1",
                        f"--out={weights if command == ['weights'] else reference}"],
                       check=True, env=tool_env(), capture_output=True, timeout=300)
    return str(weights), str(reference)


def run_cell(out, shared, framework: str, optimization: str, **env: str) -> dict:
    weights, reference = shared
    command = [sys.executable, "-m", "dlbench", "run", "--scenario=generation",
               f"--framework={framework}", "--model=tiny-gpt2", "--device=cpu",
               f"--batch={BATCH}", f"--seqlen={PROMPT}", f"--new-tokens={NEW}",
               f"--optimization={optimization}", f"--weights={weights}",
               f"--reference={reference}", *QUICK, f"--out={out}"]
    run = subprocess.run(command, env=tool_env(**env), capture_output=True, text=True,
                         timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    return result.read(out)  # validated against the schema, this scenario's part included


def check_generates_the_reference_ids(record: dict, framework: str, optimization: str):
    """The checks of one tiny-gpt2 generation cell of BATCH × PROMPT + NEW tokens, run here
    or by the generation workflow (tests/test_generation_workflow.py, from its records):
    each framework's recipe, its steps exposed (PyTorch, TensorFlow eager), or one compiled
    call (TensorFlow XLA, JAX jit)."""
    assert record["cell_id"] == (f"generation_{framework}_tiny-gpt2_cpu_b{BATCH}_p{PROMPT}"
                                 f"_n{NEW}_{optimization}")
    assert record["settings"]["reference"].endswith(
        f"tiny-gpt2/generation_b{BATCH}_p{PROMPT}_n{NEW}.npz")
    assert record["status"] == "ok", record["reason"]
    generation, correctness = record["generation"], record["correctness"]
    # transformers' GPT-2: in PyTorch the attention asked (measurement.attention, or the
    # -sdpa recipe's), the explicit attention in the others' classes
    attention = record["attention"]
    if optimization.endswith("-sdpa"):
        assert attention["setting"] == "sdpa"
    assert attention["implementation"] == (attention["setting"] if framework == "pytorch"
                                           else "eager")
    assert correctness["within_tolerance"] is True and correctness["share_equal"] == 1.0
    assert generation["new_tokens"] == NEW and generation["first_token_ms"] > 0
    assert record["throughput"]["tokens_per_s"] == pytest.approx(
        BATCH * NEW / (record["timing"]["median_ms"] / 1e3))
    low, high = generation["tokens_per_s_ci95"]
    assert low <= record["throughput"]["tokens_per_s"] <= high
    # The first token, one definition: generate's first step timed on its own; the time
    # per output token, the rest of the whole generation.
    assert generation["first_token_method"] == FIRST_TOKEN
    assert generation["per_token_method"] == "whole_minus_first"
    assert len(generation["first_token"]["samples_ms"]) >= 5  # its own timed loop
    if generation["per_token_ms"] is not None:
        assert generation["per_token_ms"] * (NEW - 1) == pytest.approx(
            record["timing"]["median_ms"] - generation["first_token_ms"], rel=0.05, abs=0.05)
    other = generation["other_prompt"]  # a prompt one token shorter, after the timed cell
    if framework == "pytorch":  # every decoding step timestamped: the stamps beside
        assert other is None  # eager and the static cache compile nothing
        assert len(generation["per_position_ms"]) == NEW - 1
        assert generation["steps"]["first_token_ms"] > 0
    else:  # one compiled call, traced once
        assert generation["per_position_ms"] is None and generation["traces"] == 1
        assert other["prompt_length"] == PROMPT - 1
        if framework == "jax":  # no padding: another prompt length is one program more
            assert other["recompiled"] is True and other["new_compilations"] == 1
        else:  # XLA's prompt padded to a multiple of 8: 7 tokens share 8's program
            assert other["recompiled"] is False and other["new_compilations"] == 0
            assert "left-padded" in generation["how"]
        if generation["per_token_ms"] is None:  # inside the two programs' difference
            assert generation["per_token_note"].startswith("not resolved")
            assert record["timing"]["median_ms"] <= generation["first_token_ms"]


# The generation workflow's cells get these checks from its records
# (tests/test_generation_workflow.py: PyTorch eager and static-cache, TensorFlow XLA); here
# JAX jit, which it does not run, and PyTorch eager once more, under the wrong-cache fault
# aimed at the static-cache cells (DLBENCH_TEST_FAULT="wrong-cache@.*_static-cache"),
# which must not strike it: its ids must still be the reference's.
CELLS = [("pytorch", "eager", {"DLBENCH_TEST_FAULT": "wrong-cache@.*_static-cache"}),
         ("jax", "jit", {})]


@pytest.mark.slow  # real `dlbench run` processes (~20 s each): left out of the quick subset
@pytest.mark.parametrize(("framework", "optimization", "env"), CELLS,
                         ids=[f"{f}-{o}" for f, o, _ in CELLS])
def test_one_cell_per_framework_generates_the_reference_ids(tmp_path, shared, framework,
                                                            optimization, env):
    if framework not in frameworks.REGISTERED:
        pytest.skip(f"{framework} is not registered")
    record = run_cell(tmp_path / "cell.json", shared, framework, optimization, **env)
    check_generates_the_reference_ids(record, framework, optimization)


@pytest.mark.slow
def test_one_process_measures_a_group_of_sizes_each_against_its_own_reference(tmp_path,
                                                                            shared):
    """A recipe's sizes in one process (measurement.process: per_group, and each side of
    side_by_side): every cell reads its own reference's ids from the model's folder."""
    weights, _ = shared
    folder = Path(weights).parent
    longer = folder / f"generation_b{BATCH}_p{PROMPT}_n{NEW + 1}.npz"
    subprocess.run([sys.executable, "-m", "dlbench.reference", "generation",
                    f"--batch={BATCH}", f"--seqlen={PROMPT}", f"--new-tokens={NEW + 1}",
                    f"--weights={weights}", "--model=tiny-gpt2", "--threads=1",
                    f"--out={longer}"], check=True, env=tool_env(), capture_output=True,
                   timeout=300)
    run = subprocess.run(
        [sys.executable, "-m", "dlbench", "run", "--scenario=generation",
         "--framework=pytorch", "--model=tiny-gpt2", "--device=cpu", f"--batch={BATCH}",
         f"--seqlen={PROMPT}", "--new-tokens", str(NEW), str(NEW + 1),
         "--optimization=eager", f"--weights={weights}", f"--reference-dir={folder}",
         *QUICK, f"--out-dir={tmp_path}"],
        env=tool_env(), capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    for position, new in enumerate((NEW, NEW + 1)):
        record = result.read(tmp_path / f"generation_pytorch_tiny-gpt2_cpu_b{BATCH}_p{PROMPT}"
                                         f"_n{new}_eager.json")
        assert record["status"] == "ok", record["reason"]
        assert record["process"]["cells"] == 2 and record["process"]["position"] == position
        assert record["settings"]["reference"] == str(
            folder / f"generation_b{BATCH}_p{PROMPT}_n{new}.npz")
        assert record["correctness"]["share_equal"] == 1.0
        assert record["generation"]["new_tokens"] == new


@pytest.mark.slow
def test_torch_compile_recompiles_only_in_the_warm_up(tmp_path, shared):
    """The static cache under torch.compile: the prompt's and the decoding step's graphs at
    the first generation, one recompilation at the second (the warm-up, at least two
    generations for a compiled recipe), none in the timed loop; the same ids."""
    record = run_cell(tmp_path / "cell.json", shared, "pytorch", "compile")
    assert record["status"] == "ok", record["reason"]
    assert record["correctness"]["within_tolerance"] is True
    assert record["timing"]["warmup_iterations"] >= 2
    assert record["compilation"]["graph_breaks"] == 0
    assert record["compilation"]["recompiles_after_second_call"] == 0
    # Another prompt length compiles nothing: the recompilation at the second generation
    # made the shapes dynamic (dynamo's automatic dynamic shapes), and the call is as
    # quick as one without compiling.
    other = record["generation"]["other_prompt"]
    assert other["prompt_length"] == PROMPT - 1 and "torch.compile" in other["counted"]
    assert other["recompiled"] is False and other["new_compilations"] == 0
    assert other["call_s"] < record["timing"]["cold_start_s"] / 2


@pytest.mark.slow
@pytest.mark.parametrize("optimization", ["eager", "static-cache"])
def test_a_corrupted_cache_fails_the_token_check(tmp_path, shared, optimization):
    """The wrong-cache fault (DLBENCH_TEST_FAULT): midway through every generation the
    key-value cache's values are corrupted (wrong sign and scale); the tokens made from it
    diverge from the reference's, first at the middle one, and the cell is a wrong
    answer."""
    record = run_cell(tmp_path / "cell.json", shared, "pytorch", optimization,
                      DLBENCH_TEST_FAULT="wrong-cache")
    assert record["status"] == "ok"
    correctness = record["correctness"]
    assert correctness["within_tolerance"] is False
    assert correctness["first_divergence"] == NEW // 2  # the first token of the bad cache
    assert correctness["share_equal"] < 1


# -- exactly `new_tokens` tokens ---------------------------------------------------------

PLANTED_END = """
import json, sys
import numpy as np
from dlbench.catalogue import recipes
from dlbench.catalogue.models import get_model
from dlbench.frameworks import load_backend, load_ops
framework, optimizations = sys.argv[1], sys.argv[2:]
ops = load_ops(load_backend(framework, "cpu", 1, 1), "generation")
prompt = np.random.RandomState(0).randint(0, 100, (1, 8))
found = {}
for name in optimizations:
    recipe = recipes.optimization("generation", name, framework)
    model = ops.build(get_model("tiny-gpt2"), 0, recipe)
    inputs = ops.inputs(prompt)
    decoder = ops.decoder(model, inputs, 6, recipe)
    free = ops.new_ids(decoder.call(), 8)
    first = decoder.first()  # generate's first step on its own: (token, cache) or token
    first = first[0] if isinstance(first, tuple) else first
    # The model's end-of-text id becomes the second token its greedy continuation makes.
    flax = getattr(model, "flax_model", None)
    (flax or model).generation_config.eos_token_id = int(free[0, 1])
    planted = ops.new_ids(ops.decoder(model, inputs, 6, recipe).call(), 8)
    found[name] = {"free": free.tolist(), "planted": planted.tolist(),
                   "first": np.asarray(first).reshape(-1).tolist()}
    ops.release()
print(json.dumps(found))
"""


@pytest.mark.slow  # a real process per framework (~10 s each)
@pytest.mark.parametrize(("framework", "optimizations"),
                         [("pytorch", ["eager", "static-cache"]),
                          ("tensorflow", ["eager", "xla"]), ("jax", ["jit"])],
                         ids=["pytorch", "tensorflow", "jax"])
def test_generation_makes_every_new_token_past_the_end_of_text_id(framework, optimizations):
    """Every framework generates exactly `new_tokens` tokens: with the model's end-of-text
    id set to the second token its greedy continuation makes, the continuation is the same
    6 tokens. transformers' TensorFlow and Flax greedy searches, given eos_token_id=None,
    fall back to the model's generation_config and stopped there (TensorFlow eager: 1
    token) or padded after it (TensorFlow XLA, JAX), where PyTorch goes on. And the call
    timed as the first token (the decoder's `first`) is generate's first step: it chooses
    the generation's first token."""
    import json

    if framework not in frameworks.REGISTERED:
        pytest.skip(f"{framework} is not registered")
    done = subprocess.run([sys.executable, "-c", one_framework(framework, PLANTED_END),
                           framework, *optimizations],
                          capture_output=True, text=True, env=tool_env(), timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    found = json.loads(done.stdout.strip().splitlines()[-1])
    for name, ids in found.items():
        assert len(ids["free"][0]) == 6, (name, ids)
        assert ids["planted"] == ids["free"], (name, ids)
        assert ids["first"] == [ids["free"][0][0]], (name, ids)


# -- why JAX's time per token is what it is -------------------------------------------------

JAX_LOOP_COPIES = """
import json, re
import jax
import numpy as np
from dlbench.catalogue import recipes
from dlbench.catalogue.models import get_model
from dlbench.frameworks import load_backend, load_ops
backend = load_backend("jax", "cpu", 1, 1)
jit = recipes.optimization("generation", "jit", "jax")
found = {}
for way in ("in-place", "as-is"):
    ops = load_ops(backend, "generation")
    ops.kernels_in_place = way == "in-place"
    model = ops.build(get_model("tiny-gpt2"), 0, jit)
    inputs = ops.inputs(np.random.RandomState(0).randint(0, 100, (1, 8)))
    decoder = ops.decoder(model, inputs, 4, jit)
    for _ in range(3):
        ids = decoder.call()
    program = ops._jitted.lower(model.params, **inputs).compile().as_text()
    copies = re.findall(r'= f32\\[([\\d,]*)\\]\\S* copy\\([^\\n]*op_name="([^"]*)"', program)
    copied = sum(4 * int(np.prod([int(d) for d in dims.split(",")]))
                 for dims, where in copies
                 if "while/body" in where and where.endswith("transpose"))
    params = model.params["transformer"]
    matrices = sum(w.size * 4 for w in jax.tree_util.tree_leaves(params) if w.ndim == 2)
    found[way] = {"copied": copied, "matrices": matrices,
                  "positions": params["wpe"]["embedding"].size * 4,
                  "words": params["wte"]["embedding"].size * 4,
                  "ids": np.asarray(ids).tolist(), "traces": decoder.traces(),
                  "implementation": ops.attention(model)["implementation_of"]}
    ops.release()
print(json.dumps(found))
"""


@pytest.mark.slow  # a real JAX process compiling tiny-gpt2's generation twice (~20 s)
def test_jax_generation_copies_no_decoder_weight_in_a_decoding_step():
    """JAX's time per token on a CPU was ~6× TensorFlow XLA's because transformers' Flax
    GPT-2 transposes every weight matrix in every decoding step (FlaxConv1D's
    `kernel.transpose()`, the tied head's `embedding.T`) and XLA materializes those
    transposes inside generate's while loop (not a retrace: one trace after the warm calls;
    not a host copy). dlbench's decoder layers contract their kernels in place: their
    copies are gone, the tied head's remains (the word embeddings, once a step), and the
    ids are the same. The transformers class as it is still copies every matrix: if
    transformers or XLA stop doing it, this fails, and config/README.md must change."""
    import json

    done = subprocess.run([sys.executable, "-c", one_framework("jax", JAX_LOOP_COPIES)],
                          capture_output=True, text=True, env=tool_env(), timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    found = json.loads(done.stdout.strip().splitlines()[-1])
    ours, theirs = found["in-place"], found["as-is"]
    assert ours["traces"] == theirs["traces"] == 1
    assert ours["ids"] == theirs["ids"]
    # every matrix but the position embeddings (looked up, not multiplied), once per step
    assert theirs["copied"] == theirs["matrices"] - theirs["positions"]
    assert ours["copied"] == ours["words"]  # the tied head's transpose alone
    assert "contracted in place" in ours["implementation"]
    assert "contracted in place" not in theirs["implementation"]


JAX_BF16_WEIGHTS = """
import json, re
import jax, jax.numpy as jnp
import numpy as np
from dlbench.catalogue import recipes
from dlbench.catalogue.models import get_model
from dlbench.frameworks import load_backend, load_ops
ops = load_ops(load_backend("jax", "cpu", 1, 1), "generation")
bf16 = recipes.optimization("generation", "jit-bf16", "jax")
model = ops.build(get_model("tiny-gpt2"), 0, bf16)
inputs = ops.inputs(np.random.RandomState(0).randint(0, 100, (1, 8)))
ops.decoder(model, inputs, 4, bf16).call()
leaves = jax.tree_util.tree_leaves(model.params)
matrices = {tuple(w.shape) for w in leaves if w.ndim == 2}
def converted(params):
    program = ops._jitted.lower(params, **inputs).compile().as_text()
    found = re.findall(r'= bf16\\[([\\d,]*)\\]\\S* convert\\(', program)
    return sorted({d for d in found if tuple(int(n) for n in d.split(",") if n) in matrices})
as_float32 = jax.tree.map(lambda w: w.astype(jnp.float32), model.params)
print(json.dumps({"dtypes": sorted({str(w.dtype) for w in leaves}),
                  "converted": converted(model.params),
                  "converted_if_float32": converted(as_float32)}))
"""


@pytest.mark.slow  # a real JAX process compiling tiny-gpt2's generation twice (~20 s)
def test_jax_bf16_generation_casts_its_weights_once_not_at_every_call():
    """JAX's bf16 generation holds its weights in bfloat16, as PyTorch's model in bfloat16:
    its compiled generation converts no weight matrix. The same program given float32
    weights converts them at every call (what the Flax modules' dtype alone would do)."""
    import json

    done = subprocess.run([sys.executable, "-c", one_framework("jax", JAX_BF16_WEIGHTS)],
                          capture_output=True, text=True, env=tool_env(), timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert found["dtypes"] == ["bfloat16"]
    assert found["converted"] == []
    assert found["converted_if_float32"]  # the check sees a cast where there is one


TF_XLA_PADDING = """
import json
import numpy as np
from dlbench.catalogue import recipes
from dlbench.catalogue.models import get_model
from dlbench.frameworks import load_backend, load_ops
backend = load_backend("tensorflow", "cpu", 1, 1)
spec = get_model("tiny-gpt2")
rng = np.random.RandomState(0)
prompts = {n: rng.randint(0, 100, (2, n)) for n in (8, 7)}
found = {}
for multiple in (8, None):
    ops = load_ops(backend, "generation")
    ops.pad_to_multiple_of = multiple
    xla = recipes.optimization("generation", "xla", "tensorflow")
    model = ops.build(spec, 0, xla)
    decoder = ops.decoder(model, ops.inputs(prompts[8]), 4, xla)
    decoder.call()
    before = decoder.traces()
    output = decoder.call_with(ops.inputs(prompts[7]))
    found[str(multiple)] = {"before": before, "after": decoder.traces(),
                            "ids": output[:, -4:].numpy().tolist()}
    eager = recipes.optimization("generation", "eager", "tensorflow")
    plain = ops.decoder(model, ops.inputs(prompts[7]), 4, eager).call()
    found[str(multiple)]["eager_ids"] = plain[:, -4:].numpy().tolist()
    ops.release()
print(json.dumps(found))
"""


@pytest.mark.slow  # a real TensorFlow process compiling tiny-gpt2's generation twice (~30 s)
def test_tensorflow_xla_pads_the_prompt_so_that_another_length_does_not_retrace():
    """transformers' XLA recipe: the prompt left-padded (masked) to a multiple of 8, a
    7-token prompt runs 8's program (no retrace) and generates the same ids as eager
    generate on the unpadded prompt; without padding it traces again."""
    import json

    done = subprocess.run([sys.executable, "-c", one_framework("tensorflow", TF_XLA_PADDING)],
                          capture_output=True, text=True, env=tool_env(), timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    found = json.loads(done.stdout.strip().splitlines()[-1])
    padded, unpadded = found["8"], found["None"]
    assert (padded["before"], padded["after"]) == (1, 1)
    assert (unpadded["before"], unpadded["after"]) == (1, 2)
    for case in (padded, unpadded):
        assert case["ids"] == case["eager_ids"]


# -- the head on the last position only, in every framework -----------------------------------

HEAD_POSITIONS = """
import json, re, sys
import numpy as np
from dlbench.catalogue import recipes
from dlbench.catalogue.models import get_model
from dlbench.frameworks import load_backend, load_ops
framework, recipe = sys.argv[1], sys.argv[2]
backend = load_backend(framework, "cpu", 1, 1)
optimization = recipes.optimization("generation", recipe, framework)
spec = get_model("tiny-gpt2")
found = {}
for last in (True, False):
    ops = load_ops(backend, "generation")
    ops.head_on_last_position = last
    model = ops.build(spec, 0, optimization)
    inputs = ops.inputs(np.random.RandomState(0).randint(0, 100, (2, 8)))
    decoder = ops.decoder(model, inputs, 4, optimization)
    ids = ops.new_ids(decoder.call(), 8)
    if framework == "jax":  # the positions of every product into the vocabulary, compiled
        program = ops._jitted.lower(model.params, **inputs).compile().as_text()
        shapes = re.findall(r"= f32\\[([\\d,]+)\\]\\S* dot\\(", program)
        dims = [[int(d) for d in s.split(",")] for s in shapes]
        positions = max(int(np.prod(d)) // spec.vocab_size for d in dims
                        if d[-1] == spec.vocab_size)
    else:  # the model as the recipe's generate calls it, compiled alike, on the prompt
        import tensorflow as tf
        logits = tf.function(lambda i, m: model(input_ids=i, attention_mask=m).logits,
                             jit_compile=recipe == "xla")
        positions = int(np.prod(logits(inputs["input_ids"], inputs["attention_mask"]).shape[:-1]))
    found[str(last)] = {"positions": positions, "ids": ids.tolist(), "how": decoder.how}
    if hasattr(ops, "release"):
        ops.release()
print(json.dumps(found))
"""


@pytest.mark.slow  # a real process per framework compiling tiny-gpt2's generation twice
@pytest.mark.parametrize(("framework", "recipe"), [("tensorflow", "xla"), ("jax", "jit")])
def test_the_head_computes_the_last_positions_logits_only_as_pytorchs_generate(framework,
                                                                               recipe):
    """PyTorch's generate asks its model for the last position's logits only
    (logits_to_keep=1); transformers' TensorFlow and Flax heads multiply every position of
    the prompt, and XLA keeps the product whole. dlbench's TensorFlow and JAX ops cut the
    head to the last position: the same tokens from the same work. Batch 2 × 8 prompt
    tokens: 2 positions' logits, not 16 (with transformers' classes unchanged)."""
    import json

    done = subprocess.run([sys.executable, "-c", one_framework(framework, HEAD_POSITIONS),
                           framework, recipe],
                          capture_output=True, text=True, env=tool_env(), timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    found = json.loads(done.stdout.strip().splitlines()[-1])
    ours, theirs = found["True"], found["False"]
    assert ours["positions"] == BATCH and theirs["positions"] == BATCH * PROMPT
    assert ours["ids"] == theirs["ids"]
    assert HEAD_ON_LAST_POSITION in ours["how"]
    assert HEAD_ON_LAST_POSITION not in theirs["how"]
