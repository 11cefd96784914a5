"""Floating-point operations of a forward pass and a training step, from the architecture.

Convention: one multiply-add is 2 FLOPs (a matrix product (m×k)·(k×n) is 2·m·k·n FLOPs).
Counted are the matrix products, which are nearly all of the work; left out are the
embedding look-ups, biases, softmax, layer norms, activations, dropout and the loss.

Transformers, with batch b, length s, width h, feed-forward width f and L layers; per
layer, in multiply-adds:

    projections   4·b·s·h²    queries, keys, values and the attention output
    feed-forward  2·b·s·h·f   up to f and back down to h
    scores        b·s²·h      Q·Kᵀ, summed over the heads (heads × head width = h)
    mix           b·s²·h      attention weights × V

Families:

- BERT, RoBERTa (BertModel, RobertaModel): f = intermediate_size; plus the pooler, a
  dense h×h layer on the first token of each sequence (b·h²).
- DistilBERT: width `dim`, f = `hidden_dim`, no pooler.
- GPT-2 (and DistilGPT-2): width `n_embd`, f = `n_inner` or 4·h. The attention is causal
  but the implementations compute the full s×s scores and mask them: counted in full.
- XLM: width `emb_dim`, f = 4·h, no pooler.
- XLNet (two-stream off, no memory, no segments): width `d_model`, f = `d_inner`; its
  relative attention also projects the 2s relative positions of every sequence (2·b·s·h²)
  and scores the queries against them (2·b·s²·h), besides the content scores (b·s²·h).

The language-model head (logits = hidden × word embeddingsᵀ, b·s·h·V for a vocabulary of
V) is not part of inference, which runs the base models; the train_step scenario's tied
head is counted (`lm_head=True`).

The vision CNN (dlbench.catalogue.models.vision, every convolution padded to keep its size): a k×k
convolution from C to C' channels on an H×W image is H·W·C·C'·k² multiply-adds, a dense
layer n → m is n·m.

Generation (greedy, a key-value cache): the prefill is the prompt's forward pass (s = the
prompt, its full s×s scores) and the head on its last position (b·h·V: the one position a
token is chosen from); decoding step k (k = 1 … new tokens − 1) is the forward pass of one
token per row against a cache of prompt + k keys — projections and feed-forward of b
tokens, scores and mix b·(prompt + k)·h each per layer, growing with the cache — and the
head on that token. Counted is the arithmetic that the dynamic cache needs: a static
cache or a padded XLA program that attends over every preallocated position computes
more (its masked positions are not counted).

A training step is 3 × the forward pass: the backward pass computes the gradients of the
activations and of the weights, each a product as large as the forward one (the first
layer's input gradient, which frameworks skip, is counted; the optimizer step, a few
operations per weight, is not).
"""

from dlbench.catalogue.models import MODELS, ModelSpec
from dlbench.catalogue.models.vision import CNN
from dlbench.catalogue.models.vision import MODELS as CNNS

FLOPS_PER_MULTIPLY_ADD = 2
# Forward + backward (activations' and weights' gradients), in forward passes.
TRAINING_STEP_FACTOR = 3

# Per family: the config keys of width, layers and feed-forward width (None: 4 × width),
# whether a pooler follows, and whether attention is XLNet's relative attention.
_KEYS = {
    "bert": ("hidden_size", "num_hidden_layers", "intermediate_size", True),
    "roberta": ("hidden_size", "num_hidden_layers", "intermediate_size", True),
    "distilbert": ("dim", "n_layers", "hidden_dim", False),
    "gpt2": ("n_embd", "n_layer", "n_inner", False),
    "xlm": ("emb_dim", "n_layers", None, False),
    "xlnet": ("d_model", "n_layer", "d_inner", False),
}


def transformer_multiply_adds(spec: ModelSpec, batch: int, seqlen: int,
                              lm_head: bool = False) -> int:
    """Multiply-adds of one forward pass of a registry transformer (see the module)."""
    width_key, layers_key, ffn_key, pooler = _KEYS[spec.family]
    h, layers = int(spec.params[width_key]), int(spec.params[layers_key])
    f = int(spec.params.get(ffn_key) or 4 * h) if ffn_key else 4 * h
    tokens = batch * seqlen
    per_layer = tokens * (4 * h * h + 2 * h * f) + 2 * batch * seqlen * seqlen * h
    if spec.family == "xlnet":
        per_layer += 2 * tokens * h * h + 2 * batch * seqlen * seqlen * h
    total = layers * per_layer
    if pooler:
        total += batch * h * h
    if lm_head:
        total += tokens * h * spec.vocab_size
    return total


def cached_multiply_adds(spec: ModelSpec, batch: int, tokens: int, past: int,
                         head_positions: int) -> int:
    """Multiply-adds of a decoder's forward pass of `tokens` new tokens per row against a
    key-value cache that already holds `past` positions (attention over past + tokens
    keys), with the language-model head on `head_positions` positions per row."""
    width_key, layers_key, ffn_key, _ = _KEYS[spec.family]
    h, layers = int(spec.params[width_key]), int(spec.params[layers_key])
    f = int(spec.params.get(ffn_key) or 4 * h) if ffn_key else 4 * h
    per_layer = (batch * tokens * (4 * h * h + 2 * h * f)
                 + 2 * batch * tokens * (past + tokens) * h)
    return layers * per_layer + batch * head_positions * h * spec.vocab_size


def generation_flops(model: str, batch: int, prompt: int, new_tokens: int) -> dict:
    """FLOPs of a greedy generation with a key-value cache: `prefill` (the prompt's forward
    pass and the head on its last position), `steps` (each decoding step's, the cache
    growing by one position a step; new tokens − 1 of them) and `total`."""
    spec = MODELS[model]
    prefill = FLOPS_PER_MULTIPLY_ADD * cached_multiply_adds(spec, batch, prompt, 0, 1)
    steps = [float(FLOPS_PER_MULTIPLY_ADD * cached_multiply_adds(spec, batch, 1, prompt + k - 1, 1))
             for k in range(1, new_tokens)]
    return {"prefill": float(prefill), "steps": steps, "total": float(prefill + sum(steps))}


def cnn_multiply_adds(cnn: CNN, batch: int) -> int:
    """Multiply-adds of one forward pass of the vision CNN on a batch of images."""
    side, total, c, k = cnn.image_size, 0, cnn.channels, cnn.kernel
    for i in range(4):
        total += side * side * c[i] * c[i + 1] * k * k
        if i % 2:  # a max-pool of 2 after every second convolution
            side //= 2
    total += cnn.flat * cnn.hidden + cnn.hidden * cnn.classes
    return batch * total


def forward_flops(model: str, batch: int, seqlen: int | None = None,
                  lm_head: bool = False) -> float:
    """FLOPs of one forward pass of a registry model (a transformer needs `seqlen`)."""
    if model in CNNS:
        return float(FLOPS_PER_MULTIPLY_ADD * cnn_multiply_adds(CNNS[model], batch))
    if seqlen is None:
        raise ValueError(f"{model}: a transformer's FLOPs need a sequence length")
    return float(FLOPS_PER_MULTIPLY_ADD
                 * transformer_multiply_adds(MODELS[model], batch, seqlen, lm_head))


def step_flops(scenario: str, model: str, batch: int, seqlen: int | None = None) -> float:
    """FLOPs of what one timed iteration of a scenario computes: a forward pass
    (inference), a training step of the CNN (training) or of a transformer with its tied
    language-model head (train_step)."""
    if scenario == "inference":
        return forward_flops(model, batch, seqlen)
    if scenario in ("training", "train_step"):
        head = scenario == "train_step"
        return TRAINING_STEP_FACTOR * forward_flops(model, batch, seqlen, lm_head=head)
    raise ValueError(f"no FLOP count for scenario {scenario!r}")
