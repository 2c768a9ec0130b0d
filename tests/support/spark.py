"""One local Spark session per test run (`spark`, ~10 s to start), on the run's embedded cluster, and a small
stateful stream to watch (`windowed_rate_counts`). Loaded as a pytest plugin by `conftest.py`."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def spark(cluster_uri: str):
    """A local Spark session with the `yt` format registered on the session's embedded cluster, UI on."""
    from opsd.config.spark import MEMORY_METRICS_CONF
    from streaming_core import build_session

    # The Spark UI on, as in opsd's sessions: the OOM check reads memory peaks from its REST API.
    session = build_session("tests", master="local[2]", cluster=cluster_uri, conf={
        "spark.sql.shuffle.partitions": "2",
        "spark.default.parallelism": "2",
        "spark.driver.memory": "1g",
        **MEMORY_METRICS_CONF,
        "spark.ui.port": "0",
        "spark.ui.showConsoleProgress": "false",
    })
    yield session
    session.stop()


def windowed_rate_counts(spark, rows_per_second: int):
    """A small stateful stream (watermark + window count over `rate`), for tests of progress and state."""
    from pyspark.sql import functions as F

    return (spark.readStream.format("rate").option("rowsPerSecond", rows_per_second).load()
            .withWatermark("timestamp", "1 second").groupBy(F.window("timestamp", "1 second")).count())
