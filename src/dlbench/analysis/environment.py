"""The environment the cells ran in, and whether it differs between them."""

from dataclasses import dataclass

import pandas as pd

from dlbench.report.format import framework_name

# (label, column) of the environment table; "git" merges the commit and the dirty flag.
ENV_FIELDS = [
    ("fingerprint", "env_fingerprint"),
    ("hostname", "env_hostname"),
    ("CPU", "env_cpu_model"),
    ("logical CPUs", "env_logical_cpus"),
    ("RAM (GiB)", "env_ram_gib"),
    ("CPU governor", "env_cpu_governor"),
    ("GPU", "env_gpu"),
    ("OS", "env_os"),
    ("Python", "env_python"),
    ("torch", "env_torch"),
    ("tensorflow", "env_tensorflow"),
    ("transformers", "env_transformers"),
    ("git commit", "git"),
]


@dataclass
class Environment:
    """table: one row per field and its value (`disagree` empty), or one row per distinct
    combination of the fields and framework with its number of cells. hosts: how many hosts
    shared one fingerprint (0 unless several did)."""

    table: pd.DataFrame
    disagree: list[str]
    hosts: int


def fields(frame: pd.DataFrame) -> pd.DataFrame:
    """One column per environment field present, one row per cell."""
    env = pd.DataFrame(index=frame.index)
    for label, column in ENV_FIELDS:
        if column == "git":
            missing = pd.Series(pd.NA, index=frame.index)
            commit = frame.get("env_git_commit", missing).astype(object)
            dirty = frame.get("env_git_dirty", missing).astype(object)
            env[label] = [
                None if pd.isna(c) else f"{str(c)[:12]}{' (dirty)' if d is True else ''}"
                for c, d in zip(commit, dirty, strict=True)
            ]
        elif column in frame:
            env[label] = frame[column].astype(object)
    return env


def environment(frame: pd.DataFrame) -> Environment | None:
    """The environment of the cells; None when the summary has no cells.

    A field disagrees only when it has several distinct known values (a framework's own
    environment may simply lack the other framework's version). Several hostnames with one
    fingerprint (the same hardware and software) do not count as a disagreement.
    """
    env = fields(frame)
    if env.empty or env.columns.empty:
        return None
    distinct = {label: env[label].dropna().astype(str).unique() for label in env}
    disagree = [label for label, values in distinct.items() if len(values) > 1]
    hosts = 0
    if len(distinct.get("fingerprint", [])) == 1 and set(disagree) <= {"hostname"}:
        hosts = len(distinct["hostname"]) if disagree else 0
        disagree = []
    if not disagree:
        values = [", ".join(v) if len(v) else "—" for v in distinct.values()]
        return Environment(pd.DataFrame({"": list(distinct), "value": values}), [], hosts)
    # astype(str) keeps a missing value missing (pandas 3) or writes it out (pandas 2).
    combos = env.assign(framework=frame["framework"].map(framework_name)).astype(str)
    combos = combos.fillna("—").replace({"None": "—", "nan": "—", "<NA>": "—"})
    combos = combos.groupby(list(combos.columns), dropna=False).size().reset_index(name="cells")
    return Environment(combos, disagree, hosts)
