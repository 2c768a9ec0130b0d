"""Benchmarks: `python -m bench.<name>` prints a table and, on its last line, one JSON object."""
