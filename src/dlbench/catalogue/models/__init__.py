"""The model registry: a model name in a config maps to architecture parameters kept here.

Nothing named by a config is imported or downloaded: a config can only pick a name from
this registry, and the transformers classes come from the fixed FAMILIES table (configs)
and each framework's declaration (models).
"""

from dataclasses import dataclass, field
from types import MappingProxyType


@dataclass(frozen=True)
class Family:
    """One transformers architecture: its config class and how its config bounds the
    inputs. Each framework names its own model class per family, in its folder
    (dlbench.frameworks.<name>.about); a family without one there has `unsupported` cells
    in that framework, with the reason.
    """

    config_class: str
    # The config key that bounds the sequence length (None: no bound, e.g. relative
    # positions), and the one that sizes the vocabulary.
    max_positions_key: str | None
    vocab_key: str = "vocab_size"
    # Positions the model reserves (RoBERTa starts counting after its padding index).
    position_offset: int = 0


FAMILIES = MappingProxyType(
    {
        "bert": Family("BertConfig", "max_position_embeddings"),
        "distilbert": Family("DistilBertConfig", "max_position_embeddings"),
        "gpt2": Family("GPT2Config", "n_positions"),
        "roberta": Family(
            "RobertaConfig", "max_position_embeddings", position_offset=2,  # padding_idx + 1
        ),
        "xlnet": Family("XLNetConfig", None),
        "xlm": Family("XLMConfig", "max_position_embeddings"),
    }
)


@dataclass(frozen=True)
class ModelSpec:
    name: str
    family: str
    params: MappingProxyType = field(hash=False)
    description: str = ""
    # Millions of parameters: sizes the memory that jobs handling the weights ask for.
    millions: float = 0.1

    @property
    def classes(self) -> Family:
        return FAMILIES[self.family]

    @property
    def max_positions(self) -> int | None:
        """The longest sequence the model takes; None where it has no bound (XLNet)."""
        key = self.classes.max_positions_key
        if key is None:
            return None
        return int(self.params[key]) - self.classes.position_offset

    @property
    def vocab_size(self) -> int:
        return int(self.params[self.classes.vocab_key])


def _spec(name: str, family: str, description: str, millions: float = 0.1,
          **params: int | float | None) -> ModelSpec:
    return ModelSpec(name, family, MappingProxyType(params), description, millions)


# Public architecture parameters of the published checkpoints (their config.json); the
# weights are random.
_BERT_BASE = dict(
    vocab_size=30522,
    hidden_size=768,
    num_hidden_layers=12,
    num_attention_heads=12,
    intermediate_size=3072,
    max_position_embeddings=512,
    type_vocab_size=2,
)
_DISTILBERT_BASE = dict(
    vocab_size=30522, dim=768, n_layers=6, n_heads=12, hidden_dim=3072, max_position_embeddings=512
)
_GPT2 = dict(vocab_size=50257, n_positions=1024, n_embd=768, n_layer=12, n_head=12)
_DISTILGPT2 = dict(_GPT2, n_layer=6)
# RoBERTa is BERT base with its own vocabulary, positions (offset by the padding id) and
# special tokens.
_ROBERTA_BASE = dict(
    _BERT_BASE,
    vocab_size=50265,
    max_position_embeddings=514,
    type_vocab_size=1,
    layer_norm_eps=1e-5,
    pad_token_id=1,
    bos_token_id=0,
    eos_token_id=2,
)
_XLNET_BASE = dict(
    vocab_size=32000, d_model=768, n_layer=12, n_head=12, d_inner=3072, ff_activation="gelu",
    mem_len=None, reuse_len=None, untie_r=True, attn_type="bi",
)
_XLM_MLM_EN_2048 = dict(
    vocab_size=30145, emb_dim=2048, n_layers=12, n_heads=16, max_position_embeddings=512,
    n_langs=1, causal=False, gelu_activation=True,
)

# Tiny variants: the same code paths in seconds, for tests.
_TINY_BERT = dict(
    vocab_size=1000,
    hidden_size=32,
    num_hidden_layers=2,
    num_attention_heads=2,
    intermediate_size=64,
    max_position_embeddings=64,
    type_vocab_size=2,
)
_TINY_DISTILBERT = dict(
    vocab_size=1000, dim=32, n_layers=2, n_heads=2, hidden_dim=64, max_position_embeddings=64
)
_TINY_GPT2 = dict(vocab_size=1000, n_positions=64, n_embd=32, n_layer=2, n_head=2)
_TINY_DISTILGPT2 = dict(_TINY_GPT2, n_layer=1)
_TINY_ROBERTA = dict(
    _ROBERTA_BASE, vocab_size=1000, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
    intermediate_size=64, max_position_embeddings=66,
)
_TINY_XLNET = dict(_XLNET_BASE, vocab_size=1000, d_model=32, n_layer=2, n_head=2, d_inner=64)
_TINY_XLM = dict(
    _XLM_MLM_EN_2048, vocab_size=1000, emb_dim=32, n_layers=2, n_heads=2,
    max_position_embeddings=64,
)

MODELS = MappingProxyType(
    {
        spec.name: spec
        for spec in (
            _spec("bert-base-uncased", "bert", "BERT base, 110M parameters", 110, **_BERT_BASE),
            _spec(
                "distilbert-base-uncased",
                "distilbert",
                "DistilBERT base, 66M parameters", 66,
                **_DISTILBERT_BASE,
            ),
            _spec("gpt2", "gpt2", "GPT-2 small, 124M parameters", 124, **_GPT2),
            _spec("roberta-base", "roberta", "RoBERTa base, 125M parameters", 125, **_ROBERTA_BASE),
            _spec("distilgpt2", "gpt2", "DistilGPT-2, 82M parameters", 82, **_DISTILGPT2),
            _spec(
                "xlnet-base-cased", "xlnet", "XLNet base, 117M parameters, relative positions",
                117,
                **_XLNET_BASE,
            ),
            _spec(
                "xlm-mlm-en-2048", "xlm", "XLM English MLM (width 2048), 666M parameters", 666,
                **_XLM_MLM_EN_2048,
            ),
            _spec("tiny-bert", "bert", "2-layer BERT, hidden 32 (tests)", **_TINY_BERT),
            _spec(
                "tiny-distilbert", "distilbert", "2-layer DistilBERT, dim 32 (tests)",
                **_TINY_DISTILBERT,
            ),
            _spec("tiny-gpt2", "gpt2", "2-layer GPT-2, width 32 (tests)", **_TINY_GPT2),
            _spec("tiny-roberta", "roberta", "2-layer RoBERTa, hidden 32 (tests)", **_TINY_ROBERTA),
            _spec("tiny-distilgpt2", "gpt2", "1-layer GPT-2, width 32 (tests)", **_TINY_DISTILGPT2),
            _spec("tiny-xlnet", "xlnet", "2-layer XLNet, width 32 (tests)", **_TINY_XLNET),
            _spec("tiny-xlm", "xlm", "2-layer XLM, width 32 (tests)", **_TINY_XLM),
        )
    }
)


def get_model(name: str) -> ModelSpec:
    try:
        return MODELS[name]
    except KeyError:
        raise KeyError(f"unknown model {name!r}; known: {', '.join(MODELS)}") from None
