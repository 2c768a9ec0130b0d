"""The `yt` data source for PySpark over YTsaurus queues, and its cluster backends.

    import streaming_core
    streaming_core.register(spark)                 # or: with streaming_core.spark_session() as spark:
    spark.readStream.format("yt").option("consumer_path", C).load(Q)

The Spark-facing names are imported lazily: processes that only use the cluster (`opsd queue ...`,
Spark workers reading a tablet) do not pay for importing PySpark; `__version__` is read from the distribution's
metadata when asked for.
"""

from typing import Any

__all__ = ["FORMAT", "YtDataSource", "activate", "build_session", "register", "spark_session"]

_LAZY = {"FORMAT": "datasource", "YtDataSource": "datasource", "register": "datasource",
         "activate": "session", "build_session": "session", "spark_session": "session", "__version__": "version"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(f"{__name__}.{_LAZY[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
