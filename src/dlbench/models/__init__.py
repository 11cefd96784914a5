"""The model registry: a model name in a config maps to architecture parameters kept here.

Nothing named by a config is imported or downloaded: a config can only pick a name from
this registry, and the transformers classes come from the fixed FAMILIES table.
"""

from dataclasses import dataclass, field
from types import MappingProxyType


@dataclass(frozen=True)
class Family:
    """The transformers classes that build one architecture, in each framework."""

    config_class: str
    pytorch_class: str
    tensorflow_class: str
    # The config key that bounds the sequence length, and the one that sizes the vocabulary.
    max_positions_key: str
    vocab_key: str = "vocab_size"


FAMILIES = MappingProxyType(
    {
        "bert": Family("BertConfig", "BertModel", "TFBertModel", "max_position_embeddings"),
        "distilbert": Family(
            "DistilBertConfig", "DistilBertModel", "TFDistilBertModel", "max_position_embeddings"
        ),
        "gpt2": Family("GPT2Config", "GPT2Model", "TFGPT2Model", "n_positions"),
    }
)


@dataclass(frozen=True)
class ModelSpec:
    name: str
    family: str
    params: MappingProxyType = field(hash=False)
    description: str = ""

    @property
    def classes(self) -> Family:
        return FAMILIES[self.family]

    @property
    def max_positions(self) -> int:
        return int(self.params[self.classes.max_positions_key])

    @property
    def vocab_size(self) -> int:
        return int(self.params[self.classes.vocab_key])


def _spec(name: str, family: str, description: str, **params: int | float) -> ModelSpec:
    return ModelSpec(name, family, MappingProxyType(params), description)


# Public architecture parameters of the published checkpoints; weights are random.
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

MODELS = MappingProxyType(
    {
        spec.name: spec
        for spec in (
            _spec("bert-base-uncased", "bert", "BERT base, 110M parameters", **_BERT_BASE),
            _spec(
                "distilbert-base-uncased",
                "distilbert",
                "DistilBERT base, 66M parameters",
                **_DISTILBERT_BASE,
            ),
            _spec("gpt2", "gpt2", "GPT-2 small, 124M parameters", **_GPT2),
            _spec("tiny-bert", "bert", "2-layer BERT, hidden 32 (tests)", **_TINY_BERT),
            _spec(
                "tiny-distilbert", "distilbert", "2-layer DistilBERT, dim 32 (tests)",
                **_TINY_DISTILBERT,
            ),
            _spec("tiny-gpt2", "gpt2", "2-layer GPT-2, width 32 (tests)", **_TINY_GPT2),
        )
    }
)


def get_model(name: str) -> ModelSpec:
    try:
        return MODELS[name]
    except KeyError:
        raise KeyError(f"unknown model {name!r}; known: {', '.join(MODELS)}") from None
