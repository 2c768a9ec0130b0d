"""The Python executable Spark starts its Python processes with (`PYSPARK_PYTHON`): `yt-spark-python`.

Why: for a pip-installed PySpark, Spark puts three parts of that installation first on the PYTHONPATH of
every Python process it starts: `pyspark/python/lib/pyspark.zip`, the py4j source zip beside it, and the
`spark-core` jar. Python caches no bytecode for a zip, so each process Spark starts outside its forking
daemon compiles PySpark and py4j from source (about a CPU-second), reads the jar's directory of ~6,000
entries, and at `importlib.invalidate_caches()` (Python 3.11) reads every zip directory again, once per
imported package. One such process is the streaming-source runner Spark launches at every start of a query
that reads a Python data source: in `bench.source` that query start took 1.34 s with those entries and
0.43-0.48 s without them.

Leaving them off changes nothing but the speed: the zip holds the very PySpark installed beside this
interpreter, the py4j zip is only left off when the same py4j version is installed, and the jars hold no
Python. `scripts/yt-spark-python`, installed beside the interpreter, does that in plain sh (a Python
launcher would itself pay ~0.1 s to start with those entries on its path) and execs the interpreter.
`build_session` uses it unless `PYSPARK_PYTHON` is set. Spark's executors start the same path, so it must
exist there too: the opsd image installs the package into the same environment.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

LAUNCHER = "yt-spark-python"


def launcher_path() -> str:
    """`yt-spark-python` if it is installed beside this interpreter and runs it, else the interpreter itself."""
    here = Path(sys.executable)
    launcher, python = here.with_name(LAUNCHER), here.with_name("python")
    if os.access(launcher, os.X_OK) and python.exists() and os.path.samefile(python, here):
        return str(launcher)
    return sys.executable
