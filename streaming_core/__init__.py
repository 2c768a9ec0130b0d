"""The `yt` data source for PySpark over YTsaurus queues, and its cluster backends.

    import streaming_core
    streaming_core.register(spark)                 # or: with streaming_core.spark_session() as spark:
    spark.readStream.format("yt").option("consumer_path", C).load(Q)
"""

from .datasource import FORMAT, YtDataSource, register
from .session import build_session, spark_session

__all__ = ["FORMAT", "YtDataSource", "build_session", "register", "spark_session"]
__version__ = "0.1.0"
