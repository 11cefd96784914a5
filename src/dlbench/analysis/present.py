"""Which scenarios a summary holds, from two of its columns: what the report's process needs
to compose the notebook's sections. The notebook's kernel derives the whole summary
(dlbench.analysis.summary); deriving it in the report's process as well cost that process
1.2 s of CPU on 2 cores (SciPy's statistics among its imports), in every report."""

from collections.abc import Iterable
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq

from dlbench import scenarios as registry
from dlbench.records import origin
from dlbench.scenarios.cell import DEFAULT_SCENARIO  # also of summaries from before scenarios


def kept(frame: pd.DataFrame) -> pd.DataFrame:
    """The cells that aggregation did not leave out (from another machine or dlbench
    version: dlbench.records.origin)."""
    if origin.LEFT_OUT not in frame:
        return frame
    return frame[~frame[origin.LEFT_OUT].astype("boolean").fillna(False)].reset_index(drop=True)


def scenario_of(frame: pd.DataFrame) -> pd.Series:
    """Each cell's scenario, DEFAULT_SCENARIO where the summary has none."""
    if "scenario" not in frame:
        return pd.Series(DEFAULT_SCENARIO, index=frame.index, dtype=object)
    return frame["scenario"].astype(object).where(frame["scenario"].notna(), DEFAULT_SCENARIO)


def ordered(present: Iterable[str]) -> list[str]:
    """The scenarios present: the registered ones in their order, then the others sorted."""
    present, known = set(present), list(registry.scenarios())
    return [s for s in known if s in present] + sorted(present - set(known))


def scenarios_in(summary: Path) -> list[str]:
    """The scenarios of a summary parquet's cells, as `summary.scenarios(summary.load(…))`
    gives them, reading only the columns that decide them."""
    columns = [c for c in ("scenario", origin.LEFT_OUT) if c in pq.read_schema(summary).names]
    return ordered(scenario_of(kept(pd.read_parquet(summary, columns=columns))))
