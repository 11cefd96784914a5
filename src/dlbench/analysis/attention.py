"""Like with like in attention: transformers' PyTorch classes can run SDPA (the fused
`scaled_dot_product_attention`, PyTorch's `-sdpa` recipes), its TensorFlow and Flax classes
only the explicit matmul-softmax-matmul. Where every framework ran one implementation, the
frameworks are compared on it; a recipe of another implementation (SDPA) shows what it pays
in its speed-up over its framework's eager, not in the comparison between frameworks."""

import pandas as pd

COLUMN = "attention_implementation"


def same_attention(cells: pd.DataFrame, keys: list[str] | None = None) -> pd.DataFrame:
    """The cells (per `keys`' group, if given) that ran the attention implementation every
    framework among them ran — cells without a recorded one (the CNN) always stay. Where
    the frameworks share no implementation (a config that gives PyTorch SDPA recipes
    only), every cell stays, and the answer says the attention is unequal."""
    if COLUMN not in cells or cells.empty:
        return cells
    if keys:
        kept = pd.concat([_same(group)
                          for _, group in cells.groupby(keys, sort=False, dropna=False)])
        return cells[cells.index.isin(kept.index)]
    return _same(cells)


def _same(cells: pd.DataFrame) -> pd.DataFrame:
    used = [set(group[COLUMN].dropna()) for _, group in cells.groupby("framework")]
    used = [names for names in used if names]
    if len(used) < 2:
        return cells
    common = set.intersection(*used)
    if not common or all(names == common for names in used):
        return cells
    return cells[cells[COLUMN].isna() | cells[COLUMN].isin(common)]
