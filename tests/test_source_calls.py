"""The cluster calls a `yt` stream's batch costs: what the source's runner asks when it plans a batch, and what a read
task asks besides its rows. On a real cluster each is a round trip to the proxy inside every batch (row latency)."""

from __future__ import annotations

import pickle
from collections import Counter
from typing import Any

import pyarrow as pa
import pytest

from streaming_core import source as source_module
from streaming_core.cluster import Cluster
from streaming_core.datasource import YtDataSource
from streaming_core.source import YtStreamReader
from tests.support.cluster import make_queue

COMPOSITE_SCHEMA = [{"name": "n", "type": "int64"},
                    {"name": "tags", "type_v3": {"type_name": "list", "item": "string"}}]


class Counted:
    """A cluster whose calls are counted by name (the calls go through to it)."""

    def __init__(self, cluster: Cluster) -> None:
        self._cluster = cluster
        self.calls: Counter[str] = Counter()

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self._cluster, name)
        if not callable(attribute):
            return attribute

        def counted(*args: Any, **kwargs: Any) -> Any:
            self.calls[name] += 1
            return attribute(*args, **kwargs)
        return counted


@pytest.fixture
def queue(yt: Cluster, yt_root: str) -> tuple[str, str]:
    q, c = f"{yt_root}/queue", f"{yt_root}/consumer"
    make_queue(yt, q, partitions=2, schema=COMPOSITE_SCHEMA, consumer=c)
    for tablet in range(2):
        yt.insert_rows(q, [{"n": i, "tags": ["a", str(i)]} for i in range(5)], tablet_index=tablet)
    return q, c


def stream_reader(uri: str, q: str, c: str) -> YtStreamReader:
    source = YtDataSource({"path": q, "consumer_path": c, "cluster": uri})
    return source.streamReader(source.schema())


def test_planning_a_batch_reads_the_queue_counters_once_per_call(yt, cluster_uri, queue):
    reader = stream_reader(cluster_uri, *queue)
    start = reader.initialOffset()
    end = reader.latestOffset(start, reader.getDefaultReadLimit())
    counted = reader._cluster = Counted(yt)
    ranges = reader.partitions(start, end)
    assert [(r.tablet_index, r.lower, r.upper) for r in ranges] == [(0, 0, 5), (1, 0, 5)]
    assert counted.calls["get_tablet_infos"] == 1  # the last rows and the trimmed ones from one reading
    assert counted.calls["get_consumer_offsets"] == 1


def test_a_read_task_asks_for_no_schema_its_yson_columns_come_with_the_partition(yt, cluster_uri, queue,
                                                                                 monkeypatch):
    reader = stream_reader(cluster_uri, *queue)
    start = reader.initialOffset()
    ranges = reader.partitions(start, reader.latestOffset(start, reader.getDefaultReadLimit()))
    assert all(r.yson_columns == {"tags"} for r in ranges)
    worker = pickle.loads(pickle.dumps(reader))
    counted = Counted(yt)
    monkeypatch.setattr(source_module, "connect", lambda uri: counted)
    rows = pa.Table.from_batches([b for r in ranges for b in worker.read(pickle.loads(pickle.dumps(r)))])
    assert rows.num_rows == 10 and pa.types.is_binary(rows.schema.field("tags").type)
    assert set(counted.calls) == {"read_tablet"}  # its rows, and nothing else asked of the cluster
