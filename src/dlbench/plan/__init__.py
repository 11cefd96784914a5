"""What to measure: the config and its validation, the settings, the matrix of cells, the
codec of their command lines and every path the workflow reads or writes."""
