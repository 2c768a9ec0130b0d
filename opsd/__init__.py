"""opsd: the operations daemon for Spark Structured Streaming over YTsaurus queues.

`opsd.attach(spark)` gives a user's own script opsd's monitoring with one call (see `opsd.monitor`).
"""

from typing import Any

__version__ = "0.1.0"


def __getattr__(name: str) -> Any:
    # Lazy, so `opsd queue ...` and the metrics module do not import (and start) PySpark.
    if name in ("attach", "Monitor"):
        from opsd import monitor

        return getattr(monitor, name)
    raise AttributeError(name)
