"""The environment the cells ran in, and whether the cells are comparable.

Two cells are not comparable when they differ in what matters for a comparison: the
hardware and its driver, the versions of the libraries on their measured path (the
framework that ran, its CUDA, cuDNN and oneDNN builds, transformers) and the precision
settings (TF32 in float32 cells). Other differences are shown as notes only: the host's
name, the operating system, Python, dlbench's commit, and the hash of every installed
package — one environment per framework (a conda environment each) differs there by design.
"""

from dataclasses import dataclass

import pandas as pd

from dlbench.catalogue.frameworks import declarations
from dlbench.format import framework_name, framework_rank

# Which libraries belong to each framework: on the measured path of its cells only. The
# first is the one whose CUDA, cuDNN and oneDNN builds the framework records (`path_<lib>_cuda`
# …): each framework's declared distributions.
FRAMEWORK_LIBRARIES = {f.name: f.distributions for f in declarations()}


@dataclass(frozen=True)
class Field:
    label: str
    column: str
    matters: bool
    # Older summaries have no per-path versions: the environment's version of the library
    # counts only in the cells of the framework that uses it.
    fallback: str | None = None
    frameworks: tuple[str, ...] | None = None
    gpu_only: bool = False  # a CUDA library is on the measured path of GPU cells only


HARDWARE = [
    Field("hardware", "env_hardware_fingerprint", True),
    Field("CPU", "env_cpu_model", True),
    Field("logical CPUs", "env_logical_cpus", True),
    Field("usable CPUs", "env_usable_cpus", True),
    Field("CPU governor", "env_cpu_governor", True),
    Field("CPU boost", "env_cpu_boost", True),
    Field("GPU", "env_gpu", True),
    Field("GPU driver", "env_gpu_driver", True),
]
SHARED = [Field("transformers", "path_transformers", True, "env_transformers")]
NOTES = [
    Field("hostname", "env_hostname", False),
    Field("RAM (GiB)", "env_ram_gib", False),
    Field("OS", "env_os", False),
    Field("Python", "env_python", False),
    Field("git commit", "git", False),
    Field("packages", "env_packages_hash", False),
]


def framework_fields(framework: str) -> list[Field]:
    """A framework's group of fields: its libraries, then its main library's builds."""
    libraries = FRAMEWORK_LIBRARIES.get(framework, ())
    group = [Field(lib, f"path_{lib}", True, f"env_{lib}", (framework,)) for lib in libraries]
    if libraries:
        main = libraries[0]
        group += [Field(f"{main} CUDA", f"path_{main}_cuda", True, gpu_only=True),
                  Field(f"{main} cuDNN", f"path_{main}_cudnn", True, gpu_only=True),
                  Field(f"{main} oneDNN", f"path_{main}_onednn", True)]
    return group


def all_fields() -> list[Field]:
    """Every field: the hardware, one group per known framework (in the registry's
    order), the libraries every framework uses, then the notes."""
    frameworks = sorted(FRAMEWORK_LIBRARIES, key=framework_rank)
    return HARDWARE + [f for fw in frameworks for f in framework_fields(fw)] + SHARED + NOTES


NOTE = ("hostname", "packages")  # differences that are expected, and named as such


@dataclass
class Environment:
    """table: one row per field and its value (when nothing that matters differs), or one
    row per distinct combination of the fields and framework with its number of cells.
    disagree: the fields that matter and differ (the cells are not all comparable); notes:
    fields that differ without mattering; hosts: how many hosts ran comparable cells (0
    unless several did)."""

    table: pd.DataFrame
    disagree: list[str]
    hosts: int
    notes: list[str]


def _column(frame: pd.DataFrame, field: Field) -> pd.Series | None:
    """The field's values per cell (NaN where it does not apply), or None if absent."""
    missing = pd.Series(pd.NA, index=frame.index, dtype=object)
    if field.column == "git":
        if "env_git_commit" not in frame:
            return None
        commit = frame["env_git_commit"].astype(object)
        dirty = frame.get("env_git_dirty", missing).astype(object)
        return pd.Series([None if pd.isna(c) else f"{str(c)[:12]}{' (dirty)' if d is True else ''}"
                          for c, d in zip(commit, dirty, strict=True)], index=frame.index)
    if field.column in frame and frame[field.column].notna().any():
        values = frame[field.column].astype(object)
    elif field.fallback and field.fallback in frame:
        values = frame[field.fallback].astype(object)
        if field.frameworks:
            values = values.where(frame["framework"].isin(field.frameworks))
    else:
        return None
    if field.gpu_only and "device" in frame:
        values = values.where(frame["device"].eq("gpu"))
    return values.where(values.notna(), None)


def fields(frame: pd.DataFrame) -> pd.DataFrame:
    """One column per environment field present, one row per cell."""
    env = pd.DataFrame(index=frame.index)
    for field in all_fields():
        values = _column(frame, field)
        if values is not None and values.notna().any():
            env[field.label] = values
    return env


def precision_settings(frame: pd.DataFrame) -> dict[str, list[str]]:
    """Per precision, the distinct TF32 settings of its cells ('TF32 on'/'TF32 off')."""
    if "arithmetic_tf32" not in frame or "precision" not in frame:
        return {}
    known = frame[frame["arithmetic_tf32"].notna()]
    return {precision: sorted({"TF32 on" if bool(v) else "TF32 off"
                               for v in cells["arithmetic_tf32"]})
            for precision, cells in known.groupby("precision")}


def environment(frame: pd.DataFrame) -> Environment | None:
    """The environment of the cells; None when the summary has no cells.

    A field differs only when it has several distinct known values (a framework's cells
    lack the other frameworks' libraries). Several hostnames with nothing that matters
    differing count as comparable hosts.
    """
    env = fields(frame)
    if env.empty or env.columns.empty:
        return None
    distinct = {label: env[label].dropna().astype(str).unique() for label in env}
    matters = {f.label for f in all_fields() if f.matters}
    differ = [label for label, values in distinct.items() if len(values) > 1]
    disagree = [label for label in differ if label in matters]
    disagree += [f"TF32 ({precision} cells)"
                 for precision, values in precision_settings(frame).items() if len(values) > 1]
    notes = [label for label in differ if label not in matters]
    hosts = len(distinct.get("hostname", [])) if not disagree and "hostname" in notes else 0
    if not disagree:
        values = [", ".join(v) if len(v) else "—" for v in distinct.values()]
        return Environment(pd.DataFrame({"": list(distinct), "value": values}), [], hosts,
                           notes)
    # astype(str) keeps a missing value missing (pandas 3) or writes it out (pandas 2).
    combos = env.assign(framework=frame["framework"].map(framework_name)).astype(str)
    combos = combos.fillna("—").replace({"None": "—", "nan": "—", "<NA>": "—"})
    combos = combos.groupby(list(combos.columns), dropna=False).size().reset_index(name="cells")
    return Environment(combos, disagree, hosts, notes)
