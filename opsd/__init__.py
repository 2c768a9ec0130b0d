"""opsd: the operations daemon for Spark Structured Streaming over YTsaurus queues.

The public API is `opsd.attach(spark)` -> `Monitor` (and `Monitor.detach()`): opsd's monitoring for a
user's own script with one call (see `opsd.runtime.monitor`). Where everything else lives: docs/code-map.md.
"""

from typing import Any

from streaming_core.version import __version__

__all__ = ["Monitor", "__version__", "attach"]


def __getattr__(name: str) -> Any:
    # Lazy, so `opsd queue ...` and the metrics module do not import (and start) PySpark.
    if name in ("attach", "Monitor"):
        from opsd.runtime import monitor

        return getattr(monitor, name)
    raise AttributeError(name)
