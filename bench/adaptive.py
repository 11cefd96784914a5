"""Adaptive stopping against fixed durations: wall time and the intervals reached.

    .venv/bin/python bench/adaptive.py optimizations [--variants fixed adaptive] [--rounds 1]
    .venv/bin/python bench/adaptive.py hf2019 --slice models=[distilgpt2] batch_sizes=[1]

Runs a preset (config/presets/<name>.yaml, narrowed by --slice, CPU only) through the real
workflow once per variant of its measurement settings, in one scratch directory: the shared
reference weights and outputs are made first, once, so that every variant's wall time is
its measuring alone. Variants: `v1`, the preset's measurement settings as they were before
adaptive stopping (git commit --v1, fixed durations); `fixed`, the same with at least 10
iterations (an interval of the median that covers 95%); `adaptive`, the preset's settings
now; `adaptive-<key>=<value>`, those with one key changed (e.g. adaptive-max_duration_s=10).
For each: the load average before and
after (the machine is shared: say which figures were taken under load), the wall time, the
time spent in timed loops, the 95% interval of each cell's median reached (± half-width
as a fraction of the median: median, 90th percentile, worst, and how many cells are within
±2%) and the flags. Per-cell figures go to <workdir>/<variant>.csv.
"""

import argparse
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd
import yaml

REPO = Path(__file__).resolve().parents[1]
SNAKEMAKE = Path(sys.executable).with_name("snakemake")
TARGET = 0.02  # the ±2% the report's comparisons are judged by
V1 = "b283ece"  # the last commit before adaptive stopping


def load() -> str:
    """The load average over 1, 5 and 15 minutes."""
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def measurement(preset: str, variant: str, v1: str) -> dict:
    """The measurement settings of a variant of the preset."""
    if variant in ("v1", "fixed"):
        old = subprocess.run(["git", "-C", str(REPO), "show", f"{v1}:config/presets/{preset}.yaml"],
                             check=True, capture_output=True, text=True).stdout
        settings = {**yaml.safe_load(old)["measurement"], "target_ci": 0}
        if variant == "fixed":
            settings["min_iterations"] = max(10, settings.get("min_iterations", 10))
        return settings
    now = yaml.safe_load((REPO / "config/presets" / f"{preset}.yaml").read_text())["measurement"]
    if variant == "adaptive":
        return now
    key, value = variant.removeprefix("adaptive-").split("=", 1)
    return {**now, key: yaml.safe_load(value)}


def snakemake(workdir: Path, *args: str) -> float:
    """Run the workflow in workdir; its wall time in seconds."""
    started = time.monotonic()
    done = subprocess.run(
        [str(SNAKEMAKE), "--snakefile", str(REPO / "Snakefile"), "--directory", str(workdir),
         "--configfile", str(workdir / "config.yaml"), "--workflow-profile",
         str(REPO / "workflow/profiles/default"), "--cores", "2", *args],
        capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"snakemake failed:\n{done.stderr[-3000:]}")
    return time.monotonic() - started


def config(preset: str, slices: list[str], settings: dict) -> dict:
    found = yaml.safe_load((REPO / "config/presets" / f"{preset}.yaml").read_text())
    found["devices"] = ["cpu"]  # no GPU cells: they would only record why not
    for item in slices:
        key, value = item.split("=", 1)
        found["inference"][key] = yaml.safe_load(value)
    found["measurement"] = settings
    return found


def figures(summary: pd.DataFrame) -> dict:
    """What a variant reached over its timed cells."""
    ok = summary[summary["status"] == "ok"]
    half = ok["median_ci95_half_width"] if "median_ci95_half_width" in ok else pd.Series(
        dtype=float)
    flagged = ok.get("flags_reasons", pd.Series("", index=ok.index)).fillna("")
    kinds = flagged.str.findall(r"(?:^|; )([a-z ]+):").explode().dropna().value_counts()
    # Waiting for the host-wide device lock (other users' cells), once per job.
    first = ok["process_position"].fillna(0).eq(0) if "process_position" in ok else True
    waited = ok.loc[first, "lock_wait_s"].sum() if "lock_wait_s" in ok else 0.0
    return {"cells": len(ok), "loops_s": ok["loop_s"].sum(), "lock_wait_s": waited,
            "iterations": int(ok["iterations"].sum()),
            "half_median": half.median(), "half_p90": half.quantile(0.9), "half_max": half.max(),
            "within_target": int((half <= TARGET).sum()),
            "flags": ", ".join(f"{n} {k}" for k, n in kinds.items()) or "none"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("preset", help="a preset's name: optimizations, hf2019, …")
    parser.add_argument("--slice", nargs="*", default=[],
                        help="inference keys narrowing the preset, e.g. models=[distilgpt2]")
    parser.add_argument("--set", nargs="*", default=[],
                        help="measurement keys for every variant, e.g. repeats=1")
    parser.add_argument("--variants", nargs="+", default=["v1", "fixed", "adaptive"])
    parser.add_argument("--v1", default=V1, help="the commit whose preset is variant v1's")
    parser.add_argument("--rounds", type=int, default=1, help="each variant this many times, "
                        "alternating the order")
    parser.add_argument("--workdir", type=Path)
    args = parser.parse_args()
    common = {k: yaml.safe_load(v) for k, v in (item.split("=", 1) for item in args.set)}
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix=f"dlbench-adaptive-{args.preset}-"))
    workdir.mkdir(parents=True, exist_ok=True)
    print(f"workdir {workdir}; preset {args.preset} {' '.join(args.slice)}; "
          f"every variant: {common or 'the preset as is'}")
    first = {**measurement(args.preset, args.variants[0], args.v1), **common}
    (workdir / "config.yaml").write_text(yaml.safe_dump(config(args.preset, args.slice, first)))
    started = load()
    wall = snakemake(workdir, "--until", "reference_output")
    print(f"references: {wall:.0f} s (load {started} → {load()})")
    rows = []
    for round_ in range(args.rounds):
        order = args.variants if round_ % 2 == 0 else args.variants[::-1]
        for variant in order:
            settings = {**measurement(args.preset, variant, args.v1), **common}
            (workdir / "config.yaml").write_text(
                yaml.safe_dump(config(args.preset, args.slice, settings)))
            before = load()
            rule = "measure_group" if settings.get("process") == "per_group" else "measure_cell"
            wall = snakemake(workdir, "--forcerun", rule)
            summary = pd.read_parquet(workdir / "results/summary.parquet")
            summary.to_csv(workdir / f"{variant}-{round_ + 1}.csv", index=False)
            shutil.copy(workdir / "report/report.html", workdir / f"{variant}-{round_ + 1}.html")
            print(f"{variant}: {settings}")
            rows.append({"variant": variant, "round": round_ + 1, "wall_s": wall,
                         **figures(summary), "load_before": before, "load_after": load()})
            row = rows[-1]
            print(f"{variant:15} round {round_ + 1}: wall {wall:6.0f} s (of which waiting for "
                  f"other users' cells {row['lock_wait_s']:.0f} s), loops "
                  f"{row['loops_s']:6.0f} s, {row['cells']} cells, {row['iterations']} "
                  "iterations; interval of the "
                  f"median ± {row['half_median']:.1%} median, {row['half_p90']:.1%} p90, "
                  f"{row['half_max']:.1%} worst, {row['within_target']}/{row['cells']} within "
                  f"±{TARGET:.0%}; flags: {row['flags']}; load {before} → {row['load_after']}")
    table = pd.DataFrame(rows)
    table.to_csv(workdir / "variants.csv", index=False)
    print(f"per-cell figures: {workdir}/<variant>-<round>.csv; this table: {workdir}/variants.csv")


if __name__ == "__main__":
    main()
