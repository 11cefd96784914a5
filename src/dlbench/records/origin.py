"""Which cells of a summary come from elsewhere: a result measured on another machine, or
by another dlbench version, than the run's (a JSON copied into results/runs/).

The run's machine and version are those of most of its cells, not those of the machine
that aggregates: the summary is often made or re-made elsewhere (a cluster's login node, a
laptop with the results copied over), where every cell would look foreign. A machine is its
CPU model and count, and for a GPU cell its GPU, compared with the run's GPU cells: not the
environment's hardware fingerprint, which also holds what a job's placement changes on one
machine (the CPUs a cpuset leaves usable, GPUs hidden from a CPU job), and not the host's
name, so that a cluster's identical nodes are one machine. A cell that recorded no identity
(an older result) is not called foreign. On a tie the cells that started first win: a
copied file rarely predates the run it was copied into.
"""

import pandas as pd

# The summary's columns: why a cell is from elsewhere (None: from the run's machine and
# version), and whether it is left out of the comparisons (analysis.summary.derive drops it).
FOREIGN = "foreign"
LEFT_OUT = "foreign_left_out"


def majority(values: pd.Series, started: pd.Series) -> object:
    """The most common known value; on a tie, that of the earliest start."""
    known = values.dropna()
    if known.empty:
        return None
    counts = known.value_counts()
    tied = counts[counts.eq(counts.max())].index
    first = started[known.index].where(known.isin(tied)).dropna()
    return known[first.idxmin()] if not first.empty else tied[0]


def _column(frame: pd.DataFrame, name: str) -> pd.Series:
    return frame[name].astype(object) if name in frame else pd.Series(
        None, index=frame.index, dtype=object)


def _cpus(frame: pd.DataFrame) -> pd.Series:
    """Each cell's CPU in words ('Intel Xeon …, 16 CPUs'); None where unrecorded."""
    model, count = _column(frame, "env_cpu_model"), _column(frame, "env_logical_cpus")
    return pd.Series([None if pd.isna(m) else m + ("" if pd.isna(n) else f", {int(n)} CPUs")
                      for m, n in zip(model, count, strict=True)], index=frame.index,
                     dtype=object)


def mark(frame: pd.DataFrame, mix: bool = False) -> pd.DataFrame:
    """The summary with FOREIGN (why a cell is from elsewhere, or None) and LEFT_OUT (from
    elsewhere and not `mix`: kept out of the comparisons, still listed)."""
    frame = frame.copy()
    started = pd.to_datetime(_column(frame, "started_at"), errors="coerce", utc=True)
    on_gpu = _column(frame, "device").eq("gpu")
    identities = {  # what differs: (each cell's value, the run's)
        "another machine": (cpus := _cpus(frame), majority(cpus, started)),
        "another GPU": (gpus := _column(frame, "env_gpu").where(on_gpu),
                        majority(gpus, started)),
        "another dlbench version": (versions := _column(frame, "env_dlbench"),
                                    majority(versions, started)),
    }
    reasons = []
    for index in frame.index:
        why = [f"{what} ({values[index]}; the run's: {run})"
               for what, (values, run) in identities.items()
               if pd.notna(values[index]) and values[index] != run]
        reasons.append(", ".join(why) or None)
    frame[FOREIGN] = pd.Series(reasons, index=frame.index, dtype=object)
    frame[LEFT_OUT] = frame[FOREIGN].notna() & (not mix)
    return frame


def describe(frame: pd.DataFrame) -> str | None:
    """One line for the aggregation's output: how many cells come from elsewhere, which,
    and whether they are compared; None when every cell is the run's."""
    foreign = frame[frame[FOREIGN].notna()] if FOREIGN in frame else frame.iloc[:0]
    if foreign.empty:
        return None
    left_out = bool(foreign[LEFT_OUT].any())
    return (f"{len(foreign)} cell{'s' if len(foreign) != 1 else ''} from elsewhere, "
            + ("left out of the comparisons (report.mix_foreign: true compares them)"
               if left_out else "compared with the others (report.mix_foreign: true)")
            + ": " + "; ".join(f"{row.cell_id}: {row.foreign}"
                               for row in foreign.itertuples()))
