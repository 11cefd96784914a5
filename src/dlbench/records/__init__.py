"""A cell's record: its schema and upgrade, atomic writes, where it came from, and the
joined table of a run."""
