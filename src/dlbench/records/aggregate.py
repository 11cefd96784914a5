"""results/runs/*.json → one tidy table, one row per cell, every status included.

Columns: the cell's parameters (scenario, framework, model, device, its scenario's sizes,
optimization), status and reason, then the result sections flattened — the sections every
scenario writes, and those its scenario adds (`Scenario.summary_sections`) — and the
environment. A scenario's size columns are empty in the rows of other scenarios. A cell
from another machine or dlbench version than the run's is marked (dlbench.records.origin).
"""

from collections.abc import Iterable
from pathlib import Path

from dlbench import scenarios
from dlbench.files import atomic
from dlbench.records import origin, result

# Result sections of every scenario: section → prefix of its columns ("": their own names,
# which the report reads).
_SECTIONS = {"timing": "", "memory": "", "startup": "", "utilization": "utilization_",
             "flags": "flags_", "optimization": "optimization_", "process": "process_",
             "details": "path_", "profile": "profile_", "arithmetic": "arithmetic_",
             "machine_noise": "machine_noise_"}
_ORDER = ["scenario", "framework", "model", "device", "optimization"]
# Per-iteration, per-slice, per-process or per-attempt details, and the frameworks' own
# switches.
_SKIP = {"samples_ms", "repeats", "method", "warmup_ms", "attempts", "switches", "slices",
         "stolen_slices"}


def _flatten(prefix: str, values: dict) -> dict:
    """Columns from a nested section: confidence intervals (…_ci95…) become _low/_high,
    lists of text (and empty lists) one '; '-joined string, other lists (per-epoch series)
    stay lists."""
    row = {}
    for key, value in values.items():
        if key in _SKIP:
            continue
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            row.update(_flatten(f"{name}_", value))
        elif isinstance(value, list) and "_ci95" in key:
            row[f"{name}_low"], row[f"{name}_high"] = value
        elif isinstance(value, list) and all(isinstance(v, str) for v in value):
            row[name] = "; ".join(value)
        elif isinstance(value, list):
            row[name] = value
        else:
            row[name] = value
    return row


def to_row(record: dict, source: Path) -> dict:
    row = {"cell_id": record["cell_id"], **record["params"], "status": record["status"],
           "reason": record["reason"], "protocol": record.get("protocol", 1),
           "attempts": len(record.get("attempts") or []) or 1}
    scenario = scenarios.get(record["params"]["scenario"])
    for section, prefix in {**_SECTIONS, **scenario.summary_sections}.items():
        row.update(_flatten(prefix, record.get(section) or {}))
    threads = record.get("threads") or {}
    row["intra_op_threads"] = threads.get("intra_op")
    row["inter_op_threads"] = threads.get("inter_op")
    environment = record["environment"]
    for key in ("fingerprint", "hardware_fingerprint", "hostname", "cpu_model", "logical_cpus",
                "usable_cpus", "ram_gib", "python", "os", "packages_hash", "dlbench"):
        row[f"env_{key}"] = environment.get(key)
    frequency = environment.get("cpu_frequency") or {}
    row["env_cpu_governor"] = frequency.get("governor")
    row["env_cpu_boost"] = frequency.get("boost")
    gpus = environment.get("gpus") or []
    row["env_gpu"] = ", ".join(g["name"] for g in gpus) or None
    row["env_gpu_driver"] = ", ".join(sorted({g["driver"] for g in gpus})) or None
    for name, version in environment["libraries"].items():
        row[f"env_{name}"] = version
    row["env_git_commit"] = environment["git"]["commit"]
    row["env_git_dirty"] = environment["git"]["dirty"]
    row["started_at"] = record["started_at"]
    row["finished_at"] = record["finished_at"]
    row["source"] = str(source)
    return row


def summarize(paths: Iterable[Path], mix_foreign: bool = False):
    """The summary DataFrame; ResultError names the first file that cannot be used."""
    return table([to_row(result.read(path), Path(path)) for path in paths], mix_foreign)


def table(rows: list[dict], mix_foreign: bool = False):
    """The summary DataFrame of rows (`to_row`), sorted, its cells from elsewhere marked
    (left out of the comparisons unless `mix_foreign`); ResultError for a cell twice."""
    import pandas as pd

    frame = pd.DataFrame(rows)
    duplicated = frame["cell_id"][frame["cell_id"].duplicated()]
    if not duplicated.empty:
        raise result.ResultError(f"cell {duplicated.iloc[0]!r} appears in more than one file")
    sizes = [axis.name for s in scenarios.scenarios().values() for axis in s.axes]
    keys = _ORDER + [name for name in dict.fromkeys(sizes) if name in frame]
    return origin.mark(frame.sort_values(keys).reset_index(drop=True), mix_foreign)


def aggregate(paths: Iterable[Path], parquet: Path, csv: Path,
              mix_foreign: bool = False) -> None:
    frame = summarize(paths, mix_foreign)
    with atomic.replacing(parquet) as tmp:
        frame.to_parquet(tmp, index=False)
    with atomic.replacing(csv) as tmp:
        frame.to_csv(tmp, index=False)
    counts = frame["status"].value_counts().to_dict()
    print(f"{len(frame)} cells: " + ", ".join(f"{n} {s}" for s, n in sorted(counts.items())))
    foreign = origin.describe(frame)
    if foreign:
        print(f"⚠ {foreign}")
