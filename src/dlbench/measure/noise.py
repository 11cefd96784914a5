"""The machine's own noise, measured beside each cell: a fixed workload — the cell's
framework's own matrix product of a fixed size, on the cell's threads — timed right after
the cell's timed loop, in the same process, once it has run a quarter of a second untimed
(WARMUP_S).

A cell's spread (the IQR of its iterations) has two parts: what the machine does to any
work at that moment (a host's neighbours, timer interrupts, frequency changes, a sampler
waking up, each of which stalls a 2-thread step at its next barrier), and what the cell
itself does (garbage collection, a loader that sometimes waits, a recompilation). Only the
second is the cell's: a cell is flagged unstable when its spread is above eight times this
workload's as well as above the fixed limit (dlbench.measure.flags), and the machine's own
figure is shown once, in the report's measurement section, instead of on every row.
BERT base at batch 1 (bench/machine_noise.py, 2-core Xeon, 2026-11-29): idle, its IQR was
1.7-7.6% of its median and the workload's 2.1-4.6%; beside a process waking every 10 ms
(0.1-0.2 of a core, under the busy flag's limit) 2.8-10.0% and 2.8-11.2%; beside a process
spinning on a core 34-84% and 25-900% (each cell flagged busy).
"""

import statistics
import time
from collections.abc import Callable

from dlbench.measure.timing import time_batch

# How long the workload is timed (at most: no longer than the cell's own loop), after its
# warm-up, and in at least MIN_SAMPLES samples.
PROBE_S = 0.25
# Before it, the workload runs this long untimed (at most: no longer than the probe): right
# after a cell's timed loop the machine is still leaving the cell's work, and a probe timed
# at once measured that transition. JAX's BERT-base eager cell, 0.25-s probes of 16 products
# a sample: IQR 8.4-16.2% at once, 3.9-6.2% after 0.25 s of warm-up, 4.2-5.7% before the cell
# (2026-11-30, 2-core Xeon); in the default run, JAX cells' probes ranged from 1.9 to 31%.
WARMUP_S = 0.25
SAMPLE_S = 0.01  # each sample: as many products as take at least this long
MIN_SAMPLES = 12
SIZE = 384  # the products' side: a few ms on 2 cores, bound by arithmetic, not memory
# A cell's IQR above this many times the workload's is the cell's own: above what the ratio
# reaches on a machine where nothing else runs. The ratio is not near 1 (a cell's iterations
# are one call each, the workload's samples ~10 ms of identical products) and differs by
# machine: in an idle default run on a 2-core Xeon (31 cells, 2026-11-29) its median was 1.3
# and its highest 7.2; on a 2-core AMD EPYC with AVX-512 (2026-12-02, bench/machine_noise.py
# and the cells of tests/test_flags_under_load.py, 21 idle cells) its median was 3.2, its
# 90th percentile 5.7 and its highest 7.4 (beside 0.1-0.2-core tickers: 1.9, 4.6, 13.3 over
# 18). At three times, the limit sat at that machine's median: where the workload spreads by
# 4% (CI's machine, 2026-12-01), idle cells at 16% were flagged, 2 of 3 in the flags test.
LIMIT_MULTIPLE = 8.0


def probe(product: Callable[[], object], synchronize: Callable[[], None],
          seconds: float = PROBE_S) -> dict:
    """The workload's relative IQR (its samples' IQR over their median) and how it was
    timed. product: one product; synchronize: waits for the device's queued work."""
    def batch(count: int) -> float:
        return time_batch(product, synchronize, count)

    batch(1)  # the library picks its kernel
    begin = time.perf_counter()
    while time.perf_counter() - begin < min(WARMUP_S, seconds):
        batch(1)
    count = 1  # doubled until a sample lasts SAMPLE_S (one product's time is too noisy)
    while batch(count) < SAMPLE_S and count < 1 << 16:
        count *= 2
    samples, begin = [], time.perf_counter()
    while len(samples) < MIN_SAMPLES or time.perf_counter() - begin < seconds:
        samples.append(batch(count) * 1e3)
    low, median, high = statistics.quantiles(samples, n=4, method="inclusive")
    return {"relative_iqr": (high - low) / median if median > 0 else 0.0,
            "median_sample_ms": median, "samples": len(samples),
            "products_per_sample": count}


def limit(fixed: float, noise: dict | None) -> float:
    """The relative IQR above which a cell is unstable: the fixed limit, or LIMIT_MULTIPLE
    times the machine's own noise measured beside it where that is higher."""
    measured = (noise or {}).get("relative_iqr")
    return fixed if measured is None else max(fixed, LIMIT_MULTIPLE * measured)
