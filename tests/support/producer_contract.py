"""The cluster contract of queue producers: what both backends must do as YTsaurus does
(`yt/yt/tests/integration/queues/test_producer.py` is where YTsaurus defines it).

`ProducerContract` is mixed into each backend's contract class beside `ClusterContract`, whose fixtures it uses:
`cluster`, `root`, `queue` (two tablets, columns `n` and `data`) and `consumer` (registered for `queue`).
"""

from __future__ import annotations

import pyarrow as pa
import pytest

from streaming_core.cluster import Cluster, ClusterError, ConflictError
from streaming_core.cluster.base import SORTED, ProducerSession, PushResult
from streaming_core.cluster.errors import (
    InvalidEpochError,
    SequenceNumberError,
    ZombieEpochError,
)
from streaming_core.cluster.schema import PRODUCER_SCHEMA

from .cluster_contract import data_rows, read_all, total_rows


def numbered(rows: list[dict], first: int) -> list[dict]:
    """Rows with `$sequence_number` first, first + 1, ..."""
    return [{**row, "$sequence_number": first + i} for i, row in enumerate(rows)]


class ProducerContract:
    """Producer tables, sessions, pushes; see the module docstring."""

    @pytest.fixture
    def producer(self, cluster: Cluster, root: str) -> str:
        path = f"{root}/producer"
        cluster.create_queue_producer(path, recursive=True)
        return path

    def test_a_producer_is_a_sorted_table_of_the_yt_producer_schema(self, cluster: Cluster, producer: str) -> None:
        info = cluster.node_info(producer)
        assert info.kind == SORTED and info.attributes.get("treat_as_queue_producer")
        columns = [(c["name"], c.get("sort_order")) for c in cluster.get(producer + "/@schema")]
        assert columns == [(c["name"], c.get("sort_order")) for c in PRODUCER_SCHEMA]

    def test_a_session_starts_at_epoch_0_and_each_creation_bumps_it(self, cluster: Cluster, queue: str,
                                                                    producer: str) -> None:
        meta = {"query": "q1", "batch": [1, 2]}
        assert cluster.create_queue_producer_session(producer, queue, "s", meta) == ProducerSession(0, -1, meta)
        assert cluster.create_queue_producer_session(producer, queue, "s") == ProducerSession(1, -1, meta)
        assert cluster.create_queue_producer_session(producer, queue, "s", "new") == ProducerSession(2, -1, "new")
        assert cluster.create_queue_producer_session(producer, queue, "other") == ProducerSession(0, -1, None)

    def test_a_removed_session_starts_again_at_epoch_0(self, cluster: Cluster, queue: str, producer: str) -> None:
        cluster.create_queue_producer_session(producer, queue, "s")
        cluster.push_queue_producer(producer, queue, "s", 0, data_rows(2), sequence_number=0)
        cluster.create_queue_producer_session(producer, queue, "s")
        cluster.remove_queue_producer_session(producer, queue, "s")
        assert cluster.select_rows(producer) == []
        assert cluster.create_queue_producer_session(producer, queue, "s") == ProducerSession(0, -1, None)

    def test_rows_at_or_below_the_stored_number_are_skipped(self, cluster: Cluster, queue: str,
                                                            producer: str) -> None:
        cluster.create_queue_producer_session(producer, queue, "s")
        first = cluster.push_queue_producer(producer, queue, "s", 0, numbered(data_rows(3), 0))
        again = cluster.push_queue_producer(producer, queue, "s", 0, numbered(data_rows(5), 0))
        assert (first, again) == (PushResult(2, 0), PushResult(4, 3))
        assert sorted(r["n"] for t in (0, 1) for r in read_all(cluster, queue, t)) == [0, 1, 2, 3, 4]
        assert cluster.create_queue_producer_session(producer, queue, "s").sequence_number == 4

    def test_an_initial_sequence_number_numbers_the_rows_in_order(self, cluster: Cluster, queue: str,
                                                                  producer: str) -> None:
        cluster.create_queue_producer_session(producer, queue, "s")
        table = pa.Table.from_pylist([{**r, "$tablet_index": 1} for r in data_rows(4)])
        assert cluster.push_queue_producer(producer, queue, "s", 0, table, sequence_number=10) == PushResult(13, 0)
        assert [r["n"] for r in read_all(cluster, queue, 1)] == [0, 1, 2, 3]
        assert read_all(cluster, queue, 0) == []

    def test_bad_sequence_numbers_write_nothing(self, cluster: Cluster, queue: str, producer: str) -> None:
        cluster.create_queue_producer_session(producer, queue, "s")
        for rows, initial in ((data_rows(1), None), (numbered(data_rows(1), 0), 0),
                              ([{"n": 1, "$sequence_number": 5}, {"n": 2, "$sequence_number": 5}], None),
                              (numbered(data_rows(1), -1), None)):
            with pytest.raises(SequenceNumberError, match=queue):
                cluster.push_queue_producer(producer, queue, "s", 0, rows, sequence_number=initial)
        assert total_rows(cluster, queue) == 0

    def test_an_older_epoch_is_a_fenced_zombie_and_a_newer_one_is_invalid(self, cluster: Cluster, queue: str,
                                                                           producer: str) -> None:
        cluster.create_queue_producer_session(producer, queue, "s")
        cluster.create_queue_producer_session(producer, queue, "s")
        with pytest.raises(ZombieEpochError, match="zombie"):
            cluster.push_queue_producer(producer, queue, "s", 0, data_rows(1), sequence_number=0)
        with pytest.raises(InvalidEpochError):
            cluster.push_queue_producer(producer, queue, "s", 2, data_rows(1), sequence_number=0)
        with pytest.raises(ClusterError, match="never"):  # YTsaurus gives no code of its own to tell it by
            cluster.push_queue_producer(producer, queue, "never", 0, data_rows(1), sequence_number=0)
        assert total_rows(cluster, queue) == 0

    def test_user_meta_travels_with_every_push(self, cluster: Cluster, queue: str, producer: str) -> None:
        cluster.create_queue_producer_session(producer, queue, "s", {"batch": 0})
        cluster.push_queue_producer(producer, queue, "s", 0, data_rows(1), sequence_number=0,
                                    user_meta={"batch": 7})
        assert cluster.create_queue_producer_session(producer, queue, "s").user_meta == {"batch": 7}

    def test_a_push_and_a_consumer_advance_commit_together(self, cluster: Cluster, queue: str, consumer: str,
                                                           producer: str) -> None:
        cluster.create_queue_producer_session(producer, queue, "s")
        with cluster.transaction() as tx:
            assert tx.push_queue_producer(producer, queue, "s", 0, data_rows(3), sequence_number=0) == \
                PushResult(2, 0)
            tx.advance_consumer(consumer, queue, 0, None, 3)
            assert total_rows(cluster, queue) == 0  # nothing before the commit
        assert total_rows(cluster, queue) == 3 and cluster.get_consumer_offsets(consumer, queue) == {0: 3}
        assert cluster.create_queue_producer_session(producer, queue, "s").sequence_number == 2

    def test_a_stale_advance_takes_the_push_down_with_it(self, cluster: Cluster, queue: str, consumer: str,
                                                         producer: str) -> None:
        cluster.create_queue_producer_session(producer, queue, "s")
        cluster.advance_consumer(consumer, queue, 0, None, 3)
        with pytest.raises(ConflictError), cluster.transaction() as tx:
            tx.push_queue_producer(producer, queue, "s", 0, data_rows(3), sequence_number=0)
            tx.advance_consumer(consumer, queue, 0, 1, 8)
        assert total_rows(cluster, queue) == 0
        assert cluster.create_queue_producer_session(producer, queue, "s").sequence_number == -1
