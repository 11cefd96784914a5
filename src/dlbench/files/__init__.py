"""The workflow's files: every path it reads or writes, named once (paths.py), and how a
file is written (atomic.py: whole or not at all, a full disk named)."""
