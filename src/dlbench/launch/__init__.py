"""Launching measurements: the supervisor (fork, guard, wait) and the run of a job's cells."""
