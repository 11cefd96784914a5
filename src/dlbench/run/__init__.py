"""Running measurements: the supervisor (fork, guard, wait), a job's cells, the results
folder's lock, recovery after a failed run, planted faults."""
