"""Matrix expansion: every combination, stable readable ids, and which cells cannot apply."""

from dlbench import config
from dlbench.matrix import Cell, expand_cells
from tests.conftest import TINY_CONFIG


def test_product_of_the_axes_with_unique_ids():
    cells = expand_cells(config.validate(TINY_CONFIG))
    assert len(cells) == 2 * 2 * 2 * 2 * 2 * 2
    assert len({c.id for c in cells}) == len(cells)


def test_ids_are_readable_and_stable():
    cell = Cell("pytorch", "bert-base-uncased", "cpu", 8, 128, "eager")
    assert cell.id == "pytorch_bert-base-uncased_cpu_b8_s128_eager"
    assert Cell(**cell.params()).id == cell.id


def test_optimization_of_the_other_framework_is_unsupported():
    reason = Cell("pytorch", "tiny-bert", "cpu", 1, 8, "graph").unsupported_reason()
    assert reason == "optimization 'graph' does not exist in PyTorch (only in TensorFlow)"
    assert Cell("tensorflow", "tiny-bert", "cpu", 1, 8, "graph").unsupported_reason() is None


def test_sequence_longer_than_the_model_is_unsupported():
    assert Cell("pytorch", "gpt2", "cpu", 1, 1024, "eager").unsupported_reason() is None
    reason = Cell("pytorch", "bert-base-uncased", "cpu", 1, 1024, "eager").unsupported_reason()
    assert reason == "sequence length 1024 exceeds bert-base-uncased's maximum of 512 positions"


def test_cli_args_name_every_parameter():
    args = Cell("tensorflow", "tiny-gpt2", "gpu", 2, 16, "graph").cli_args()
    assert args == ["--framework=tensorflow", "--model=tiny-gpt2", "--device=gpu", "--batch=2",
                    "--seqlen=16", "--optimization=graph"]
