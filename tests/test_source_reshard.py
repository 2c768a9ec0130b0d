"""Tablets added to a queue under a running `yt` query: read from the next batch on, every row once; tablets removed:
the query stops with `QueueReshardedError`. On the embedded cluster and on the YTsaurus backend through the HTTP
stand-in.

The fast tests drive the stream reader as Spark's streaming source runner does (offsets cross as JSON text, the
previous batch is committed when the next one is planned, rows are read on pickled copies); the Spark tests reshard a
queue under a running query.
"""

from __future__ import annotations

import json
import pickle
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from structlog.testing import capture_logs

from streaming_core.cluster import BeyondQueueEndError, Cluster, QueueReshardedError, connect
from streaming_core.datasource import YtDataSource
from streaming_core.source import YtStreamReader
from tests.support.cluster import make_queue
from tests.support.source import batches, checkpoint_of, numbered, read_queue, rows_read, run_until


@pytest.fixture(params=["embedded", "ytsaurus"])
def backend(request: pytest.FixtureRequest, cluster_uri: str) -> Iterator[tuple[Cluster, str]]:
    """An open cluster and its URI: the embedded one, or the YTsaurus backend through the stand-in."""
    uri = cluster_uri if request.param == "embedded" else request.getfixturevalue("open_standin").uri
    with connect(uri) as cluster:
        yield cluster, uri


@pytest.fixture
def queue(backend: tuple[Cluster, str]) -> tuple[str, str]:
    """A 2-tablet queue with a registered consumer, under a fresh directory: (queue, consumer)."""
    cluster, _ = backend
    root = f"//tmp/reshard-{uuid.uuid4().hex[:12]}"
    q, c = f"{root}/queue", f"{root}/consumer"
    make_queue(cluster, q, consumer=c)
    return q, c


def stream_reader(uri: str, q: str, c: str, **options: str) -> YtStreamReader:
    source = YtDataSource({"path": q, "consumer_path": c, "cluster": uri, **options})
    return source.streamReader(source.schema())


class Runner:
    """Spark's streaming source runner in miniature: `step()` plans the next batch from the last committed end (the
    consumer's position on the first), commits the batch before it, and reads the new one on pickled copies of the
    reader; offsets cross as JSON text, as in a checkpoint."""

    def __init__(self, reader: YtStreamReader, checkpoint: str | None = None) -> None:
        self.reader = reader
        self.checkpoint = checkpoint or json.dumps(reader.initialOffset())
        self.committed: str | None = None

    def step(self) -> list[int] | None:
        """The `n` of every row of the next batch; None when there is no new offset (Spark plans no batch)."""
        start = json.loads(self.checkpoint)
        end = json.loads(json.dumps(self.reader.latestOffset(start, self.reader.getDefaultReadLimit())))
        if end == start:
            return None
        if self.committed is not None:
            self.reader.commit(json.loads(self.committed))
        worker = pickle.loads(pickle.dumps(self.reader))
        read = [n for part in self.reader.partitions(start, end) for batch in worker.read(part)
                for n in batch.column("n").to_pylist()]
        self.checkpoint = self.committed = json.dumps(end)
        return read

    def end(self) -> dict[str, Any]:
        return json.loads(self.checkpoint)


class TestTabletsAdded:
    def test_added_tablets_are_read_from_the_next_batch_every_row_once(self, backend, queue):
        cluster, uri = backend
        q, c = queue
        cluster.insert_rows(q, numbered(20))
        runner = Runner(stream_reader(uri, q, c))
        before = runner.step()
        cluster.insert_rows(q, numbered(4, start=20))

        cluster.reshard(q, 4)
        cluster.insert_rows(q, numbered(3, start=24), tablet_index=3)
        cluster.insert_rows(q, numbered(8, start=27))  # spread over the four tablets
        with capture_logs() as logs:
            after = runner.step()
        cluster.insert_rows(q, numbered(2, start=35), tablet_index=2)
        last = runner.step()

        assert sorted(before + after + last) == list(range(37))
        assert runner.end()["partitions"] == {"0": 13, "1": 13, "2": 3, "3": 4}
        assert cluster.get_consumer_offsets(c, q) == {0: 14, 1: 14, 2: 2, 3: 5}  # the batch before the last
        assert runner.step() is None
        assert [(e["event"], e["partitions"], e["start"]) for e in logs] == [
            ("queue_partitions_added", [2, 3], {"2": 0, "3": 0})]

    def test_an_added_tablet_starts_where_the_consumer_stands_on_it(self, backend, queue):
        cluster, uri = backend
        q, c = queue
        cluster.insert_rows(q, numbered(4))
        runner = Runner(stream_reader(uri, q, c))
        runner.step()
        cluster.reshard(q, 3)
        cluster.insert_rows(q, numbered(5, start=100), tablet_index=2)
        cluster.advance_consumer(c, q, 2, None, 3)  # rows 0..2 of the new tablet were acknowledged elsewhere

        assert runner.step() == [103, 104]

    def test_a_spyt_checkpoint_of_fewer_partitions_goes_on_and_gains_the_new_ones(self, backend, queue):
        cluster, uri = backend
        q, c = queue
        cluster.insert_rows(q, numbered(3), tablet_index=0)
        cluster.insert_rows(q, numbered(3, start=3), tablet_index=1)
        cluster.reshard(q, 3)
        cluster.insert_rows(q, numbered(2, start=6), tablet_index=2)
        spyt = json.dumps({"cluster": cluster.name, "path": q, "partitions": {"0": 1, "1": 1}})

        runner = Runner(stream_reader(uri, q, c), spyt)

        assert sorted(runner.step()) == [2, 5, 6, 7]
        assert runner.end()["partitions"] == {"0": 2, "1": 2, "2": 1}

    def test_under_available_now_a_tablet_added_after_the_start_waits_for_the_next_run(self, backend, queue):
        cluster, uri = backend
        q, c = queue
        cluster.insert_rows(q, numbered(4))
        reader = stream_reader(uri, q, c)
        reader.prepareForTriggerAvailableNow()
        cluster.reshard(q, 3)
        cluster.insert_rows(q, numbered(3, start=4), tablet_index=2)

        runner = Runner(reader)
        assert sorted(runner.step()) == [0, 1, 2, 3]
        assert runner.step() is None
        assert sorted(Runner(stream_reader(uri, q, c), runner.checkpoint).step()) == [4, 5, 6]


class TestTabletsRemoved:
    def test_a_checkpoint_that_read_a_removed_tablet_stops_the_query_naming_it_and_the_way_out(self, backend,
                                                                                                 queue):
        cluster, uri = backend
        q, c = queue
        cluster.reshard(q, 4)
        cluster.insert_rows(q, numbered(8))
        runner = Runner(stream_reader(uri, q, c))
        runner.step()
        for tablet in (2, 3):
            cluster.trim_rows(q, tablet, 2)
        cluster.reshard(q, 2)

        with pytest.raises(QueueReshardedError) as err:
            runner.step()
        with pytest.raises(QueueReshardedError):
            runner.reader.partitions(runner.end(), runner.end())

        message = str(err.value)
        assert f"{q}: the checkpoint has read partitions 2, 3, but the queue now has 2 tablet(s)" in message
        assert "new checkpointLocation" in message and f"consumer {c}" in message
        assert f"opsd queue reshard {q} --tablets N" in message

    def test_a_tablet_removed_and_added_again_has_fewer_rows_than_the_checkpoint_read(self, backend, queue):
        cluster, uri = backend
        q, c = queue
        cluster.reshard(q, 3)
        cluster.insert_rows(q, numbered(3, start=50), tablet_index=2)
        runner = Runner(stream_reader(uri, q, c))
        runner.step()
        cluster.trim_rows(q, 2, 3)
        cluster.reshard(q, 2)
        cluster.reshard(q, 3)

        with pytest.raises(BeyondQueueEndError) as err:
            runner.step()
        assert f"{q}: partition 2: the checkpoint is at row 3 (last read 2), but the queue ends at 0 rows" in str(
            err.value)
        assert "removed and added again by reshards" in str(err.value)


# -- under a running Spark query ---------------------------------------------------------------------------------


@pytest.mark.parametrize("where", ["embedded", "ytsaurus"])
def test_tablets_added_under_a_running_query_are_read_without_a_restart_every_row_once(spark, yt, yt_root, where,
                                                                                      request):
    uri = None if where == "embedded" else request.getfixturevalue("open_standin").uri
    with connect(uri) if uri else connect(yt.uri) as cluster:
        root = yt_root if uri is None else f"//tmp/reshard-{uuid.uuid4().hex[:12]}"
        q, c = f"{root}/queue", f"{root}/consumer"
        make_queue(cluster, q, consumer=c)
        cluster.insert_rows(q, numbered(40))
        steps = [
            (lambda query: rows_read(query) >= 40, lambda: cluster.reshard(q, 4)),
            # a batch of the new, still empty tablets first: then rows into old and new tablets
            (lambda query: any(len(b.end) == 4 for b in batches(query)), lambda: (
                cluster.insert_rows(q, numbered(20, start=40)),
                cluster.insert_rows(q, numbered(10, start=60), tablet_index=3),
                cluster.insert_rows(q, numbered(10, start=70), tablet_index=0))),
        ]

        def step(query) -> None:
            if steps and steps[0][0](query):
                steps.pop(0)[1]()

        run = run_until(read_queue(spark, q, c, cluster=uri or yt.uri), checkpoint_of(yt_root),
                        lambda query: rows_read(query) >= 80, on_progress=step)

    assert sorted(r["n"] for r in run.rows) == list(range(80))
    assert sorted(run.batches[-1].end) == [0, 1, 2, 3]
