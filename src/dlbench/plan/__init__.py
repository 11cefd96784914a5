"""What to measure: the config and its validation, the settings, the matrix of cells and the
order of their rounds. Every path the workflow reads or writes is dlbench.files.paths."""
