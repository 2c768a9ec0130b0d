"""One embedded cluster per test run (`cluster_uri`, `yt`), a fresh directory per test (`yt_root`), and queues
made the way users make them (`make_queue`). Loaded as a pytest plugin by `conftest.py`.

Tests that touch the cluster work under their own fresh `//tmp/t<uuid>` directory (`yt_root`), so they share the
cluster (and the Spark session built on it) without seeing each other's tables.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from streaming_core.cluster import connect
from streaming_core.cluster.base import Cluster

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


def make_queue(cluster: Cluster, path: str, *, partitions: int = 2, schema: list | None = None,
               consumer: str | None = None) -> None:
    """Create a queue (and a registered consumer) the way users do before starting a query."""
    cluster.create("table", path, recursive=True, attributes={
        "dynamic": True, "tablet_count": partitions, "schema": schema or QUEUE_SCHEMA})
    if consumer:
        cluster.create_consumer(consumer, recursive=True)
        cluster.register_queue_consumer(path, consumer)
