"""Where a training cell's time goes: a verdict per cell, the figures that decided it, the
ablation that proves it, and what to try next.

The verdict, from thresholds anchored on the profilers users know (TensorFlow's profiler
calls a step highly input-bound from 20% of its time waiting for input and moderately from
5%; PyTorch's profiler plugin warns below 50% GPU utilization):

  input-bound          the step waits for the next batch ≥ 20% of its time, or the ablation
                       (the same steps fed from device memory) runs ≥ 25% faster: efficiency
                       ≤ 80% — the pipeline can also slow the step itself (loaders taking
                       cores, decoding evicting the caches)
  partly input-bound   waiting ≥ 5%, or efficiency ≤ 95%

An efficiency counts only where its 95% interval (from the intervals of the two medians)
lies below the threshold: on a noisy host a 94% efficiency may be noise.
  host-bound           (GPU) the device idles most of the step (utilization < 50%) while
                       nothing waits for input: launch and Python overhead
  gpu-bound            (GPU) utilization ≥ 50% and the input keeps up
  compute-bound        (CPU) the step's own computation dominates and the input keeps up

The ablation must agree: a cell judged input-bound by its waiting whose ablation gains
(almost) nothing (efficiency ≥ 95%) contradicts itself and is marked so.

A cell with a noise flag (busy or noisy machine, unstable, …: dlbench.measure.flags) is
"not decided", the flag its reason: its figures describe the load, not the pipeline. No
advice compares it with another cell, nor another cell with it. One exception: a cell
flagged unstable alone, whose waiting and ablation both say input-bound, is decided: a
starved pipeline's steps are uneven by nature (uneven_waiting).
"""

import numpy as np
import pandas as pd

from dlbench.catalogue.recipes import COMPILED, optimizations
from dlbench.format import framework_name
from dlbench.measure.flags import NOISE

INPUT_BOUND_WAIT, PARTLY_WAIT = 0.20, 0.05
INPUT_BOUND_EFFICIENCY, PARTLY_EFFICIENCY = 0.80, 0.95
HOST_BOUND_UTILIZATION = 50.0  # % of the time the GPU was busy

INPUT, PARTLY, HOST, GPU, COMPUTE = ("input-bound", "partly input-bound", "host-bound",
                                     "gpu-bound", "compute-bound")
UNDECIDED = "not decided"
NEXT = {
    UNDECIDED: "measure it again on an idle machine (measurement.retry_noisy does it by "
               "itself)",
    INPUT: "more loader workers (w<N>), decoded images cached (-cache), or the decoded set in "
           "memory",
    PARTLY: "one more loader worker, or more batches prepared ahead (-p<M>)",
    HOST: "fewer, larger kernels: torch.compile / XLA, CUDA graphs, a larger batch",
    GPU: "less arithmetic or faster arithmetic: bf16/fp16 (tensor cores), channels_last",
    COMPUTE: "a compiler (torch.compile, XLA), channels_last, bf16 where the CPU has it, "
             "a larger batch",
}
# A cell whose recipe is compiled already (the training recipe registry says so) is not told
# to compile.
NEXT_COMPILED = {
    HOST: "CUDA graphs, a larger batch",
    COMPUTE: "channels_last, bf16 where the CPU has it, a larger batch",
}


# Where the cell's processes left less than this much of a core idle, a loader worker
# more would take its cores from the step: the advice for waiting says so, with the cores
# they kept busy.
NO_SPARE_CORE = 0.5
NEXT_NO_SPARE_CORE = {
    INPUT: "decoded images cached (-cache) or the decoded set in memory: the cell's "
           "processes kept {used:.2f} of {cores:g} cores busy, so more loader workers would "
           "take cores from the step",
    PARTLY: "decoded images cached (-cache) or the decoded set in memory: the cell's "
            "processes kept {used:.2f} of {cores:g} cores busy, so a loader worker more "
            "would take cores from the step",
}


def advice(name: str, optimization: str, row=None) -> str:
    """What to try next for a verdict, given the cell's optimization and, where the row
    says how many cores its processes kept busy, whether a core is left for a loader."""
    if name in NEXT_COMPILED and recipe_kind(optimization) == COMPILED:
        return NEXT_COMPILED[name]
    if name in NEXT_NO_SPARE_CORE and row is not None and not spare_core(row):
        return NEXT_NO_SPARE_CORE[name].format(**_cores(row))
    return NEXT[name]


def spare_core(row) -> bool:
    """Whether the cell's processes (the step and its loaders) left at least NO_SPARE_CORE
    of a core of the machine unused (True where the figures are missing: no evidence of the
    contrary)."""
    found = _cores(row)
    used, cores = found["used"], found["cores"]
    return np.isnan(used) or np.isnan(cores) or used < cores - NO_SPARE_CORE


def _cores(row) -> dict[str, float]:
    """The cores the cell's processes kept busy (mean) and the machine's."""
    cores = _number(row, "utilization_logical_cpus")
    cores = _number(row, "env_logical_cpus") if np.isnan(cores) else cores
    return {"used": _number(row, "utilization_process_cpu_cores_mean"), "cores": cores}


def recipe_kind(optimization: str) -> str | None:
    """'eager' or 'compiled' as the training recipe registry declares it (None: unknown)."""
    try:
        return optimizations("training")[optimization].recipe.kind
    except KeyError:
        return None


def _true(value) -> bool:
    """A stored flag that is set (missing or NaN: not set)."""
    return value is not None and not pd.isna(value) and bool(value)


def _number(row, column) -> float:
    value = row.get(column) if hasattr(row, "get") else None
    return float(value) if value is not None and not pd.isna(value) else np.nan


def efficiency_interval(row) -> tuple[float, float]:
    """The 95% interval of the pipeline's efficiency: as recorded (throughput over wall
    time), or for older records from the intervals of the two medians; NaN without an
    ablation."""
    recorded = (_number(row, "ablation_efficiency_ci95_low"),
                _number(row, "ablation_efficiency_ci95_high"))
    if not any(np.isnan(v) for v in recorded):
        return recorded
    real = (_number(row, "median_ci95_ms_low"), _number(row, "median_ci95_ms_high"))
    ceiling = (_number(row, "ablation_median_ci95_ms_low"),
               _number(row, "ablation_median_ci95_ms_high"))
    if any(np.isnan(v) or v <= 0 for v in (*real, *ceiling)):
        return np.nan, np.nan
    return ceiling[0] / real[1], ceiling[1] / real[0]


def undecided(row) -> bool:
    """Whether a cell's noise flags leave it without a verdict (uneven_waiting excepted)."""
    flagged = noise_flags(row)
    return bool(flagged) and not (flagged == ["unstable"] and uneven_waiting(row))


def noise_flags(row) -> list[str]:
    """The noise flags the harness set on a cell (summary columns flags_<name>), in words."""
    return [name.replace("_", " ") for name in NOISE if _true(row.get(f"flags_{name}"))]


def verdict(row) -> tuple[str, str]:
    """(verdict, the figures that decided it) of one training cell (a summary row); a
    flagged cell is not decided, except where its only flag is the unevenness of a starved
    pipeline (uneven_waiting)."""
    flagged = noise_flags(row)
    if not flagged:
        return figures_verdict(row)
    reasons = row.get("flags_reasons")
    detail = reasons if isinstance(reasons, str) and reasons else ", ".join(flagged)
    if undecided(row):
        return UNDECIDED, f"rests on a flagged measurement ({', '.join(flagged)}): {detail}"
    name, why = figures_verdict(row)  # unstable alone, from a starved pipeline
    return name, (f"{why}; its steps vary ({detail}) because some wait for a batch and "
                  "others find one ready: the pipeline's unevenness, not the machine's noise")


def uneven_waiting(row) -> bool:
    """Whether a cell's spread of step times is its pipeline's: it waits ≥ 20% of each step
    for data and fed from device memory it runs faster beyond the noise (efficiency ≤ 80% at
    the top of its interval). Loader workers deliver batches in bursts, so such steps are
    bimodal — waiting, or not — and their IQR can pass the unstable flag's 10% without any
    noise: seen on an H100, where PyTorch's 2 workers left the CNN's steps at 4.9 ms median
    with an IQR of 222% of it, 60% of the time waiting, at a third of the ablation's speed."""
    wait = _number(row, "breakdown_input_wait_share")
    _, high = efficiency_interval(row)
    return wait >= INPUT_BOUND_WAIT and high <= INPUT_BOUND_EFFICIENCY


def figures_verdict(row) -> tuple[str, str]:
    """(verdict, reason) from the cell's figures alone, whatever its flags say."""
    wait = _number(row, "breakdown_input_wait_share")
    efficiency = _number(row, "ablation_efficiency")
    _, high = efficiency_interval(row)
    high = efficiency if np.isnan(high) else high  # without intervals, the figure itself
    utilization = _number(row, "utilization_gpu_utilization_mean")
    waiting = f"waits {wait:.1%} of each step for data"
    proof = (f"fed from device memory the same steps run {1 / efficiency:.2f}× as fast "
             f"(efficiency {efficiency:.0%}, at most {high:.0%})" if efficiency > 0
             else "no ablation")
    if wait >= INPUT_BOUND_WAIT:
        return INPUT, f"{waiting}; {proof}"
    if high <= INPUT_BOUND_EFFICIENCY:
        return INPUT, (f"{proof}, though it waits only {wait:.1%}: with the real pipeline the "
                       "step itself is slower (loaders taking cores, decoding evicting the "
                       "caches, copies)")
    if wait >= PARTLY_WAIT or high <= PARTLY_EFFICIENCY:
        return PARTLY, f"{waiting}; {proof}"
    if row.get("device") == "gpu" and np.isnan(utilization):
        # NVML's utilization covers its last second: a shorter loop has none of its own
        # (dlbench.measure.sampler), and a GPU cell is host- or gpu-bound, never "compute".
        return UNDECIDED, (f"{waiting}; {proof}; no GPU utilization for the timed steps "
                           "(shorter than NVML's 1-s period, or no NVML): host- or "
                           "gpu-bound cannot be told apart")
    if row.get("device") == "gpu":
        busy = f"the GPU was busy {utilization:.0f}% of the time"
        if utilization < HOST_BOUND_UTILIZATION:
            return HOST, f"{waiting}, yet {busy}: launches and Python keep it waiting"
        return GPU, f"{waiting}; {busy}"
    return COMPUTE, f"{waiting}; {proof}: the step's own computation dominates"


def agrees(row) -> bool:
    """Whether the waiting and the ablation tell the same story: no cell may wait ≥ 20% for
    data while feeding it from memory gains nothing (efficiency ≥ 95%)."""
    wait = _number(row, "breakdown_input_wait_share")
    efficiency = _number(row, "ablation_efficiency")
    return np.isnan(efficiency) or not (wait >= INPUT_BOUND_WAIT
                                        and efficiency >= PARTLY_EFFICIENCY)


def evidence(row) -> str:
    """The sampled figures beside the verdict: CPU of the process and its workers, the disk
    reads, the page cache at the start, and the GPU where there is one."""
    main = _number(row, "utilization_main_process_cpu_cores_mean")
    tree = _number(row, "utilization_process_cpu_cores_mean")
    read = _number(row, "utilization_disk_read_mb_per_s")
    cached = _number(row, "pipeline_page_cache_resident_fraction")
    parts = []
    if not np.isnan(tree):
        workers = max(tree - (main if not np.isnan(main) else tree), 0.0)
        parts.append(f"CPU: the training process {main:.2f} cores, its loaders {workers:.2f}")
    if not np.isnan(read):
        parts.append(f"{read:.1f} MB/s read from disk")
    if not np.isnan(cached):
        cold = " (evicted first)" if row.get("pipeline_page_cache_evicted") is True else ""
        parts.append(f"{cached:.0%} of the data set in the page cache at the start{cold}")
    if _true(row.get("pipeline_page_cache_still_resident")):
        parts.append(str(row.get("pipeline_page_cache_still_resident_reason")))
    utilization = _number(row, "utilization_gpu_utilization_mean")
    if not np.isnan(utilization):
        parts.append(f"GPU busy {utilization:.0f}%")
    return "; ".join(parts)


def _alternatives(row, trained: pd.DataFrame) -> str:
    """What the matrix measured that answers the verdict: the fastest other pipeline or
    optimization of the same framework, model, batch and optimizer, and its gain; flagged
    cells neither get nor give such advice."""
    clean = [not undecided(other) for _, other in trained.iterrows()]
    if undecided(row):
        return ""
    trained = trained[clean]
    same = trained[(trained["framework"] == row["framework"]) & (trained["model"] == row["model"])
                   & (trained["batch"] == row["batch"]) & (trained["optimizer"] == row["optimizer"])
                   & (trained["device"] == row["device"]) & (trained["cell_id"] != row["cell_id"])
                   & (trained["profiled"] == row["profiled"])]
    if same.empty:
        return ""
    best = same.loc[same["samples_per_s"].idxmax()]
    gain = best["samples_per_s"] / row["samples_per_s"]
    if gain <= 1.0:
        return ""
    return (f"; measured here: pipeline {best['pipeline']} with {best['optimization']} runs "
            f"{gain:.2f}× as fast")


def table(trained: pd.DataFrame) -> pd.DataFrame:
    """One row per training cell: the verdict, the figures that decided it, the ablation's
    ceiling and the pipeline's efficiency, the sampled evidence, what to try next."""
    rows = []
    for _, row in trained.sort_values("cell_id").iterrows():
        name, reason = verdict(row)
        ceiling = _number(row, "ablation_samples_per_s")
        efficiency = _number(row, "ablation_efficiency")
        rows.append({
            "cell": row["cell_id"], "verdict": name + ("" if name == UNDECIDED or agrees(row)
                                                       else " (contradicts its ablation)"),
            "why": reason,
            "images/s": f"{row['samples_per_s']:,.0f}" + (" (profiled)" if row["profiled"]
                                                          else ""),
            "ceiling images/s": "—" if np.isnan(ceiling) else f"{ceiling:,.0f}",
            "efficiency": "—" if np.isnan(efficiency) else "{:.0%} ({:.0%}–{:.0%})".format(
                efficiency, *efficiency_interval(row)) + (
                " ⚠ no ceiling: the pipeline beat its ablation"
                if row.get("ablation_not_a_ceiling") is True else ""),
            "evidence": evidence(row),
            "try next": advice(name, row["optimization"], row) + _alternatives(row, trained),
            "flame graph": row.get("profile_svg") if row.get("profile_status") == "ok" else (
                row.get("profile_reason") or ""),
        })
    return pd.DataFrame(rows)


def first_epoch_table(trained: pd.DataFrame) -> pd.DataFrame:
    """One row per training cell: its first epoch (cold with `cold_cache`) from wall time —
    images/s, the share of it spent waiting for data — beside the later epochs, with the
    data set's residency after eviction and the flag where eviction did not take."""
    if "pipeline_first_epoch_images_per_s" not in trained:
        return pd.DataFrame()

    def figure(value, form: str) -> str:
        return "—" if value is None or pd.isna(value) else form.format(value)

    rows = []
    for _, row in trained.sort_values("cell_id").iterrows():
        evicted = _true(row.get("pipeline_page_cache_evicted"))
        still = _true(row.get("pipeline_page_cache_still_resident"))
        rows.append({
            "cell": row["cell_id"], "first epoch": "cold (evicted)" if evicted else "warm",
            "resident at the start": figure(row.get("pipeline_page_cache_resident_fraction"),
                                            "{:.0%}"),
            "first epoch images/s": figure(row.get("pipeline_first_epoch_images_per_s"),
                                           "{:,.0f}"),
            "without its first step": figure(
                row.get("pipeline_first_epoch_images_per_s_after_first_step"), "{:,.0f}"),
            "waiting for data": figure(row.get("pipeline_first_epoch_input_wait_share"),
                                       "{:.1%}"),
            "later epochs images/s": figure(
                row.get("pipeline_first_epoch_later_epochs_images_per_s"), "{:,.0f}"),
            "flag": row.get("pipeline_page_cache_still_resident_reason") if still else "",
        })
    return pd.DataFrame(rows)


def pipeline_table(trained: pd.DataFrame) -> pd.DataFrame:
    """Images/s per framework and optimization (rows) and input pipeline (columns): which
    knob moved what."""
    grid = trained.assign(framework=trained["framework"].map(framework_name)).pivot_table(
        index=["framework", "optimization", "optimizer"], columns="pipeline",
        values="samples_per_s", aggfunc="first")
    return grid.map(lambda v: "" if pd.isna(v) else f"{v:,.0f}").reset_index()
