# %% tags=["parameters"]
# The generation section of the report: greedy text generation with a decoder. This cell
# lets the section run on its own; in the report, the head's parameters replace it.
summary = "results/summary.parquet"

# %%
import matplotlib.pyplot as plt

from dlbench.analysis import generation
from dlbench.analysis.summary import load, of_scenario, several_devices
from dlbench.format import framework_name
from dlbench.report.display import say, show

everything = load(summary)
df = of_scenario(everything, "generation")
several = several_devices(df)

# %% [markdown]
# # Text generation: time to the first token and per output token
#
# A decoder of the registry with its language-model head (tied to the word embeddings), the
# same seeded weights and the same seeded prompt in every framework, generates a fixed number
# of new tokens greedily (no stop at the end-of-text token). One timed iteration is one whole
# generation; the first call (compilation, tracing) is timed apart. **Time to first token**,
# one definition in every framework and recipe: generate()'s first step timed on its own,
# through the recipe's model compiled alike — the prompt's forward pass with the key-value
# cache generate gives it, and the greedy choice; in every framework the head computes the
# logits of the last position only, as PyTorch's generate asks. **Time per output
# token**: (whole − first token) / (new tokens − 1). Where the framework runs the decoding
# loop step by step (PyTorch, TensorFlow eager), each step is also timestamped and the
# figure below shows it by position. In rounds, each figure is the geometric mean of its
# fresh processes' medians, as the answer's whole generation is, with their range in
# brackets: two figures whose ranges overlap are not told apart by this run.
# **Token for token**: in fp32 every generated id must equal PyTorch eager fp32's; a cell
# that diverged is a wrong answer (✗), its speed does not count. In bf16, greedy decoding may
# take another token where two logits are within rounding: the share of equal tokens and the
# first divergence are recorded, not judged. bf16 is not the same work everywhere: PyTorch's
# and JAX's weights are bfloat16, TensorFlow's mixed_bfloat16 policy keeps them float32 and
# casts them at every call.

# %%
for metric, title in generation.METRICS.items():
    say(f"## Median {title} (ms)")
    found = generation.sheets(df, metric)
    if not found:
        say("No generation cells to tabulate.")
    for sheet in found:
        where = f" ({sheet.device})" if several else ""
        say(f"### {framework_name(sheet.framework)} — {sheet.optimization}, "
            f"{sheet.new_tokens} new tokens{where}")
        show(sheet.table.reset_index(), left=["model"])

# %% [markdown]
# ## Time per output token against its position
#
# The median time of each decoding step over the timed generations, for the cells whose
# framework exposes each step (right answers only): a step that grows with the position is
# attention over a longer cache; a flat line is a static cache or a step dominated by
# overhead.

# %%
steps = generation.positions(df)
fig = generation.plot_positions(steps)
if fig is None:
    say("No cell exposed its decoding steps.")
else:
    plt.show()

# %% [markdown]
# ## Generated tokens per second against batch size
#
# batch × new tokens / median latency, with the 95% interval of the latency's median as
# error bars (right answers only).

# %%
rates = generation.tokens_per_s(df)
fig = generation.plot_tokens_per_s(rates)
if fig is None:
    say("No timed generation cell with a right answer.")
else:
    plt.show()

# %% [markdown]
# ## Compilations across prompt lengths
#
# Each cell generates with one prompt length, so its compiled recipe compiles once. A process
# that serves prompts of several lengths may compile again for each: after the timed cell,
# every compiled recipe generates once more with a prompt one token shorter, through the same
# compiled functions, and the table says whether that compiled anew (the number of programs
# it added: torch.compile's graphs, the tf.function's traces, jax.jit's XLA programs) and how
# long that call took. Recipes that compile nothing are not listed. TensorFlow xla pads the
# prompt to a multiple of 8 tokens (transformers' XLA recipe): a prompt one token shorter than
# a multiple of 8 pads to the same shape, so its "no" is the padding at work.

# %%
recompiled = generation.recompilations(df)
if recompiled.empty:
    say("No compiled generation recipe was timed.")
else:
    show(recompiled, left=["framework", "optimization", "model", "compiled anew", "counted"])

# %% [markdown]
# ## Token for token against the reference

# %%
checks = generation.token_check(df)
if checks.empty:
    say("No generation cell was checked (no reference ids were given).")
else:
    show(checks, left=["framework", "optimization", "model", "precision", "verdict"])
    wrong = checks[checks["verdict"].eq("✗ diverged")]
    if not wrong.empty:
        say(f"**✗ {len(wrong)} fp32 cells generated other ids than the reference**: their "
            "timings do not count.")
