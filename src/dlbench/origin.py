"""Which cells of a summary come from elsewhere: a result measured on another machine, or
by another dlbench version, than the run's (a JSON copied into results/runs/).

The run's machine and version are those of most of its cells, not those of the machine
that aggregates: the summary is often made or re-made elsewhere (a cluster's login node, a
laptop with the results copied over), where every cell would look foreign. A machine is its
hardware fingerprint (CPU model, CPUs, clock settings, GPUs: the environment's
`hardware_fingerprint`), so that a cluster's identical nodes are one machine; a cell that
recorded no identity (older results) is not called foreign. On a tie the identity of the
cells that started first wins: a copied file rarely predates the run it was copied into.
"""

import pandas as pd

# The summary's columns: why a cell is from elsewhere (None: from the run's machine and
# version), and whether it is left out of the comparisons (analysis.summary.derive drops it).
FOREIGN = "foreign"
LEFT_OUT = "foreign_left_out"
MACHINE = "env_hardware_fingerprint"
VERSION = "env_dlbench"


def majority(values: pd.Series, started: pd.Series) -> object:
    """The most common known value; on a tie, that of the earliest start."""
    known = values.dropna()
    if known.empty:
        return None
    counts = known.value_counts()
    tied = counts[counts.eq(counts.max())].index
    first = started[known.index].where(known.isin(tied)).dropna()
    return known[first.idxmin()] if not first.empty else tied[0]


def _machine(row: pd.Series) -> str:
    """A machine in words: its CPU and CPUs, GPU, and host."""
    parts = [str(row.get("env_cpu_model") or "unknown CPU")]
    if pd.notna(row.get("env_logical_cpus")):
        parts[0] += f", {int(row['env_logical_cpus'])} CPUs"
    if pd.notna(row.get("env_gpu")):
        parts.append(str(row["env_gpu"]))
    if pd.notna(row.get("env_hostname")):
        parts.append(f"host {row['env_hostname']}")
    return "; ".join(parts)


def mark(frame: pd.DataFrame, mix: bool = False) -> pd.DataFrame:
    """The summary with FOREIGN (why a cell is from elsewhere, or None) and LEFT_OUT (from
    elsewhere and not `mix`: kept out of the comparisons, still listed)."""
    frame = frame.copy()
    empty = pd.Series(None, index=frame.index, dtype=object)
    started = pd.to_datetime(frame.get("started_at", empty), errors="coerce", utc=True)
    machines, versions = frame.get(MACHINE, empty), frame.get(VERSION, empty)
    machine, version = majority(machines, started), majority(versions, started)
    home = frame[machines.eq(machine)].iloc[0] if machine is not None else None
    reasons = []
    for index, row in frame.iterrows():
        why = []
        if pd.notna(machines[index]) and machines[index] != machine:
            why.append(f"another machine ({_machine(row)}; the run's: {_machine(home)})")
        if pd.notna(versions[index]) and versions[index] != version:
            why.append(f"dlbench {versions[index]} (the run's: {version})")
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
