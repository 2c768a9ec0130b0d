"""Shared fixtures: one embedded cluster and one local Spark session per test run.

Tests that touch the cluster work under their own fresh `//tmp/t<uuid>` directory (`yt_root`), so they
share the session (Spark takes ~10 s to start) without seeing each other's tables.
"""

from __future__ import annotations

import os
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from streaming_core.cluster import connect
from streaming_core.cluster.base import Cluster

os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)

#: The CLI tests' fixtures (`uri`, `cluster`, `opsd`); a real Prometheus (`prometheus`, `opsd_server`); the YTsaurus
#: stand-in (`standin`, `standin_cluster`, `open_standin`).
pytest_plugins = ["cli_support", "prometheus_support", "standin_support"]

QUEUE_SCHEMA = [{"name": "data", "type": "string"}, {"name": "n", "type": "int64"}]


@pytest.fixture(scope="session")
def cluster_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("cluster")


@pytest.fixture(scope="session")
def cluster_uri(cluster_root: Path) -> str:
    return f"local://{cluster_root}"


@pytest.fixture
def yt(cluster_uri: str) -> Iterator[Cluster]:
    """The session's embedded cluster, opened for this test."""
    with connect(cluster_uri) as cluster:
        yield cluster


@pytest.fixture
def yt_root(yt: Cluster) -> str:
    """A fresh directory for this test's tables."""
    path = f"//tmp/t{uuid.uuid4().hex[:12]}"
    yt.create("map_node", path, recursive=True)
    return path


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


def make_queue(cluster: Cluster, path: str, *, partitions: int = 2, schema: list | None = None,
               consumer: str | None = None) -> None:
    """Create a queue (and a registered consumer) the way users do before starting a query."""
    cluster.create("table", path, recursive=True, attributes={
        "dynamic": True, "tablet_count": partitions, "schema": schema or QUEUE_SCHEMA})
    if consumer:
        cluster.create_consumer(consumer, recursive=True)
        cluster.register_queue_consumer(path, consumer)


def windowed_rate_counts(spark, rows_per_second: int):
    """A small stateful stream (watermark + window count over `rate`), for tests of progress and state."""
    from pyspark.sql import functions as F

    return (spark.readStream.format("rate").option("rowsPerSecond", rows_per_second).load()
            .withWatermark("timestamp", "1 second").groupBy(F.window("timestamp", "1 second")).count())
