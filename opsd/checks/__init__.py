"""Periodic checks: the scheduler, and one subpackage per check, each split collect -> evaluate -> decide -> apply.

Evaluate and decide modules are pure (no cluster, no Spark, no clock: time is a parameter); only apply modules
change the world. `import-linter` (pyproject.toml) holds every check to that.
"""
