"""A cell's record: its schema and upgrade, where it came from, and the joined table of a
run (written atomically by dlbench.files.atomic)."""
