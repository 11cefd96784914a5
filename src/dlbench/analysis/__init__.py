"""The report's tables and derived columns as tested functions of the summary.

Every function takes the summary as `dlbench.analysis.summary.load` or `derive` returns it
(derived columns added, missing columns filled) and returns a DataFrame or plain values;
nothing here displays. Module by module:

summary      loading, derived columns (timed, checked, wrong answer, eager baseline, speed-up)
headline     the answer first: the fastest right answer per input size, cells needing a look
environment  the environment table and whether the cells' environments disagree
status       cells per status, the cells without a timing, those not applicable by design
flags        the stability flags: as stored, and recomputed from the stored figures
latency      the 2019-style latency spreadsheet per framework, optimization and device
quality      the measurement-quality table
speedup      speed-up over eager per cell, and the per-optimization overview
compilation  compile, trace and conversion times
correctness  errors against the reference, and the wrong answers
ratio        every framework against the fastest: the best of each, their ratio per cell
startup      the start-up cost of a process
gpu          GPU cells: device time, memory, utilization
memory       memory by phase, against input size, its growth per 1,000 tokens
scaling      throughput against batch size and sequence length, with intervals
reproduce    the command, config and identities that re-run the matrix
generic      the table of a scenario that has no report section of its own
efficiency   FLOPs, achieved FLOP/s and the share of the machine's measured peak per cell
roofline     the efficiency figure: achieved FLOP/s against work, the peaks as ceilings
plots        figures drawn on given matplotlib axes
plots_size   figures against input size: memory, throughput
"""
