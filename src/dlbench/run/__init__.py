"""Running measurements: the supervisor (fork, guard, wait), the measuring child's work
(cell.py), a job's cells, rounds, the machine's GEMM peaks (peak.py), interleaved runs, the
results folder's lock."""
