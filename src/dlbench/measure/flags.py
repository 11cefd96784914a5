"""The flags of a cell and their thresholds, in one place: the harness sets the flags when it
measures, the analysis recomputes them from the stored figures.

Noise flags say that the timing may not be what an idle machine would give; a cell with
one is what `measurement.retry_noisy` measures again:
- unstable: the spread of the iterations (IQR) is large: above a fixed share of the median,
  and above eight times the machine's own noise measured beside the cell (dlbench.measure.noise),
  so that a machine that spreads every workload alike does not flag every cell;
- noisy machine: the host stole CPU time from this virtual machine during the timed loop;
- busy machine: other processes kept cores busy that the cell needed, during the timed
  loop (they slow every iteration alike, so the IQR stays low while the median rises);
- spread between processes: with `repeats`, the medians of the fresh processes disagree;
- interval not reached: with `target_ci`, the 95% interval of the median never got within
  the target before `max_duration_s`.
One more flag is not noise, and repeating does not change it:
- not one graph: torch.compile split the model (graph breaks) or compiled it more than
  once (recompilations), so part of the step ran eagerly or a compile landed in the loop.
"""

from dlbench.measure import noise as machine_noise
from dlbench.measure.sampler import NOISY_STEAL_FRACTION

# A cell whose IQR exceeds this fraction of its median (and 8x the machine's own noise).
UNSTABLE_RELATIVE_IQR = 0.10
# Cores kept busy by other processes beyond those the cell left free (the machine's
# logical CPUs minus the cell's threads), averaged over the timed loop. On an idle 2-core
# machine the supervisor's own sampling and the system stay below 0.05 of a core.
BUSY_OTHER_LOAD_CORES = 0.25
# With repeats: the coefficient of variation of the processes' medians.
SPREAD_BETWEEN_PROCESSES_CV = 0.05

NOISE = ("unstable", "noisy_machine", "busy_machine", "spread_between_processes",
         "ci_not_reached")
FLAGS = (*NOISE, "not_one_graph")


def contention(window: dict, threads: int | None) -> float | None:
    """Cores that other processes took from the cell: their load beyond the cores the
    cell left free (None where the window lacks the figures)."""
    other, cpus = window.get("other_load_cores"), window.get("logical_cpus")
    if other is None:
        return None
    free = max(0, cpus - threads) if cpus and threads else 0
    return max(0.0, other - free)


def highest(windows: list[dict | None], key: str) -> float | None:
    """The largest `key` over a cell's processes' utilization windows (None where no
    window has it): what its flags judge, and what its record shows."""
    return max((w[key] for w in windows if w and w.get(key) is not None), default=None)


def flags(relative_iqr: float, windows: list[dict | None], *, threads: int | None = None,
          between_cv: float | None = None, interval: dict | None = None,
          compilation: dict | None = None, noise: dict | None = None) -> dict:
    """The flags of a cell, and their reasons.

    relative_iqr: of its samples; windows: the supervisor's utilization windows of its
    timed loops (one per process; None where unsampled); threads: the cell's threads;
    between_cv: the spread of the processes' medians (repeats); interval: the timing's
    `target_ci`, `stopped_by` and `median_ci95_half_width`; compilation: torch.compile's
    `graphs`, `graph_breaks` and `recompiles`; noise: the machine's own noise measured
    beside the cell (dlbench.measure.noise: its `relative_iqr`).
    """
    sampled = [w for w in windows if w]
    steal = highest(windows, "steal_fraction")
    others = [c for w in sampled if (c := contention(w, threads)) is not None]
    busy = max(others, default=None)
    result = dict.fromkeys(FLAGS, False)
    reasons = []
    unstable = machine_noise.limit(UNSTABLE_RELATIVE_IQR, noise)
    if relative_iqr > unstable:
        result["unstable"] = True
        beside = (noise or {}).get("relative_iqr")
        reasons.append(f"unstable: IQR is {relative_iqr:.0%} of the median (limit "
                       f"{unstable:.0%}" + ("" if beside is None else
                       f"; a fixed workload's beside it: {beside:.0%}") + ")")
    if steal is not None and steal > NOISY_STEAL_FRACTION:
        result["noisy_machine"] = True
        reasons.append(f"noisy machine: {steal:.0%} of the CPU time was stolen by the host "
                       f"(limit {NOISY_STEAL_FRACTION:.0%}); re-run this cell")
    if busy is not None and busy > BUSY_OTHER_LOAD_CORES:
        result["busy_machine"] = True
        reasons.append(f"busy machine: other processes kept {busy:.2f} of the cell's cores "
                       f"busy during its timed loop (limit {BUSY_OTHER_LOAD_CORES:.2f}); "
                       "re-run this cell")
    if between_cv is not None and between_cv > SPREAD_BETWEEN_PROCESSES_CV:
        result["spread_between_processes"] = True
        reasons.append(f"spread between processes: their medians vary by {between_cv:.1%} "
                       f"(coefficient of variation; limit {SPREAD_BETWEEN_PROCESSES_CV:.0%})")
    if interval and interval.get("target_ci") and interval.get("stopped_by") == "max_duration":
        reached, target = interval.get("median_ci95_half_width"), interval["target_ci"]
        result["ci_not_reached"] = True
        reasons.append(f"interval not reached: the 95% interval of the median is "
                       f"±{reached:.1%} after max_duration_s (target ±{target:.1%})"
                       if reached is not None else
                       f"interval not reached: target ±{target:.1%} by max_duration_s")
    split = not_one_graph(compilation) if compilation else None
    if split:
        result["not_one_graph"] = True
        reasons.append(split)
    result["reasons"] = reasons
    return result


def not_one_graph(compilation: dict) -> str | None:
    """Why a compiled step is not one graph compiled once (None where it is). Where the
    record counts the recompilations after the warm-up (`recompiles_after_second_call`: a
    generation, which compiles its prompt's and its decoding step's graphs apart and
    recompiles once in its warm-up by design), only those and graph breaks count."""
    breaks = compilation.get("graph_breaks") or 0
    after_warmup = compilation.get("recompiles_after_second_call")
    if after_warmup is not None:
        if not (breaks or after_warmup):
            return None
        return (f"not one graph: {breaks} graph break(s) and {after_warmup} "
                "recompilation(s) after the warm-up")
    graphs, recompiles = compilation.get("graphs", 1), compilation.get("recompiles") or 0
    if not (graphs > 1 or breaks or recompiles):
        return None
    return (f"not one graph: {graphs} graph(s), with {breaks} graph break(s) and "
            f"{recompiles} recompilation(s)")


def noisy(cell_flags: dict | None) -> bool:
    """Whether a cell has a noise flag (worth measuring again)."""
    return bool(cell_flags) and any(cell_flags.get(name) for name in NOISE)


def cell_flags(record: dict, windows: list[dict | None], between_cv: float | None = None,
               relative_iqr: float | None = None) -> dict:
    """The flags of a measured record, from its figures and the utilization windows of
    its processes (relative_iqr: the spread within a process, if not its samples')."""
    timing = record["timing"]
    spread = timing["relative_iqr"] if relative_iqr is None else relative_iqr
    return flags(spread, windows, threads=record["settings"].get("threads"),
                 between_cv=between_cv, interval=timing,
                 compilation=record.get("compilation"), noise=record.get("machine_noise"))
