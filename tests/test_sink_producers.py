"""Producer mode of the `yt` sink (`streaming_core.sink_producer`): options, sessions, zombie tasks fenced off, and a
batch larger than a tablet transaction written once. The kill tests of both producer modes are in
`test_sink_guarantees.py`."""

from __future__ import annotations

import importlib.metadata
import tomllib
import uuid
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pytest
import structlog
from packaging.requirements import Requirement
from packaging.version import Version
from pyspark.sql.types import LongType, StringType, StructField, StructType

from streaming_core.cluster import Cluster, ClusterError, SchemaError, connect
from streaming_core.cluster.errors import ZombieEpochError
from streaming_core.options import SRC_ROW_INDEX, SRC_TABLET_INDEX, SinkOptions
from streaming_core.sink import plan_sink
from streaming_core.sink_producer import (
    SEQUENCE_STRIDE,
    SessionPusher,
    TaskPosition,
    prepare_producer,
    remove_sessions,
)
from tests.support.sink import COPY_SCHEMA, make_table, multiset, ordered_rows, session_conf
from tests.support.standin import STANDIN_TOKEN

ROOT = Path(__file__).resolve().parent.parent
DF = StructType([StructField("data", StringType()), StructField("n", LongType())])


@pytest.fixture(params=["embedded", "ytsaurus"])
def backend(request: pytest.FixtureRequest, cluster_uri: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[Cluster]:
    """The run's embedded cluster, or the stand-in through `ytsaurus-client` (its token in `YT_TOKEN`, where the
    sink's own connections find it)."""
    monkeypatch.setenv("YT_TOKEN", STANDIN_TOKEN)
    uri = cluster_uri if request.param == "embedded" else request.getfixturevalue("standin").uri
    with connect(uri, token=STANDIN_TOKEN) as cluster:
        yield cluster


@pytest.fixture
def target(backend: Cluster) -> str:
    path = f"//tmp/producers/{uuid.uuid4().hex[:12]}/out"
    make_table(backend, path, COPY_SCHEMA, tablets=2)
    return path


def options(backend: Cluster, target: str, **more) -> SinkOptions:
    return SinkOptions.parse({"path": target, "cluster": backend.uri, "checkpointLocation": "/ckpt/q1",
                              "producer_path": target + "_producer", "create_producer": "true", **more}, {})


def rows(lo: int, hi: int) -> pa.Table:
    return pa.table({"data": [f"r{i}" for i in range(lo, hi)], "n": list(range(lo, hi))})


class TestOptions:
    def test_producer_options_need_producer_path(self) -> None:
        with pytest.raises(ValueError, match="need option 'producer_path'"):
            SinkOptions.parse({"path": "//t", "create_producer": "true"}, {})

    def test_producer_mode_and_transactional_exclude_each_other(self) -> None:
        with pytest.raises(ValueError, match="give one"):
            SinkOptions.parse({"path": "//t", "producer_path": "//p"}, {"spark.yt.streaming.transactional": "true"})

    def test_the_session_name_is_checked_and_the_numbering_named(self) -> None:
        with pytest.raises(ValueError, match="producer_session"):
            SinkOptions.parse({"path": "//t", "producer_path": "//p", "producer_session": "a b"}, {})
        with pytest.raises(ValueError, match="producer_sequence"):
            SinkOptions.parse({"path": "//t", "producer_path": "//p", "producer_sequence": "row"}, {})
        parsed = SinkOptions.parse({"path": "//t", "producer_path": "//p/", "producer_sequence": "SOURCE"}, {})
        assert (parsed.producer_path, parsed.producer_sequence, parsed.create_producer) == ("//p", "source", False)


class TestPlan:
    def test_the_producer_is_created_with_the_target_when_asked(self, backend: Cluster, target: str) -> None:
        plan_sink(options(backend, target), DF, overwrite=False)
        assert backend.get(target + "_producer/@treat_as_queue_producer")

    def test_a_missing_producer_is_named(self, backend: Cluster, target: str) -> None:
        with pytest.raises(Exception, match="_producer"):
            plan_sink(options(backend, target, create_producer="false"), DF, overwrite=False)

    def test_source_numbering_needs_the_sources_service_columns(self, backend: Cluster, target: str) -> None:
        with pytest.raises(SchemaError, match="include_service_columns"):
            plan_sink(options(backend, target, producer_sequence="source"), DF, overwrite=False)
        with_service = StructType([StructField(SRC_TABLET_INDEX, LongType()), StructField(SRC_ROW_INDEX, LongType()),
                                   *DF.fields])
        plan_sink(options(backend, target, producer_sequence="source"), with_service, overwrite=False)

    def test_producer_mode_writes_queues_only(self, backend: Cluster) -> None:
        kv = f"//tmp/producers/{uuid.uuid4().hex[:12]}/kv"
        make_table(backend, kv, [{"name": "n", "type": "int64", "sort_order": "ascending"},
                                 {"name": "data", "type": "string"}])
        with pytest.raises(SchemaError, match="ordered_dynamic"):
            plan_sink(options(backend, kv), DF, overwrite=False)


class TestSessions:
    def pusher(self, backend: Cluster, target: str, batch: int, attempt: int, **more) -> SessionPusher:
        return SessionPusher(backend, options(backend, target, **more), TaskPosition(batch, 0, attempt))

    def test_a_zombie_attempt_is_refused_after_a_newer_one_started(self, backend: Cluster, target: str) -> None:
        plan_sink(options(backend, target), DF, overwrite=False)
        zombie = self.pusher(backend, target, batch=3, attempt=0)
        zombie.push_chunk(rows(0, 10), rows(0, 10), 10, 0)
        retry = self.pusher(backend, target, batch=3, attempt=1)  # Spark gave up on attempt 0 and runs the task again
        stats = retry.push_all(iter([(rows(0, 15), rows(0, 15)), (rows(15, 30), rows(15, 30))]), 15)
        with structlog.testing.capture_logs() as logs, pytest.raises(ZombieEpochError, match="fenced off") as err:
            zombie.push_chunk(rows(10, 20), rows(10, 20), 10, 10)
        assert "attempt 0 of partition 0 of batch 3" in str(err.value)
        assert [e["event"] for e in logs] == ["producer_zombie_fenced"]
        assert (stats.rows, stats.producer_skipped_rows, stats.producer_epoch_bumps) == (20, 10, 1)
        assert multiset(ordered_rows(backend, target), "data", "n") == multiset(rows(0, 30).to_pylist(), "data", "n")

    def test_a_replayed_batch_is_skipped_and_the_session_says_where_it_was(self, backend: Cluster,
                                                                             target: str) -> None:
        plan_sink(options(backend, target), DF, overwrite=False)
        self.pusher(backend, target, batch=5, attempt=0).push_all(iter([(rows(0, 8), rows(0, 8))]), 8)
        replay = self.pusher(backend, target, batch=5, attempt=0)
        assert replay.push_all(iter([(rows(0, 8), rows(0, 8))]), 8).producer_skipped_rows == 8
        session = backend.create_queue_producer_session(target + "_producer", target, next(iter(replay.sessions)))
        assert session.sequence_number == 5 * SEQUENCE_STRIDE + 7
        assert session.user_meta == {"query": replay._meta()["query"], "batch_id": 5, "partition": 0, "attempt": 0}
        assert len(ordered_rows(backend, target)) == 8

    def test_a_deleted_querys_sessions_are_removed(self, backend: Cluster, target: str) -> None:
        plan_sink(options(backend, target), DF, overwrite=False)
        pusher = self.pusher(backend, target, batch=0, attempt=0, producer_session="q1")
        pusher.push_all(iter([(rows(0, 4), rows(0, 4))]), 4)
        backend.create_queue_producer_session(target + "_producer", target, "q2-p0")
        assert remove_sessions(backend, target + "_producer", target, "q1") == ["q1-p0"]
        assert [r["session_id"] for r in backend.select_rows(target + "_producer")] == ["q2-p0"]


@pytest.mark.timeout(600)
def test_a_batch_of_300000_rows_to_one_tablet_is_written_once_through_the_stand_in(spark, open_standin,
                                                                                   tmp_path) -> None:
    """Over YTsaurus' 100,000 rows per tablet per transaction (the stand-in refuses a larger push with 1717): the
    task pushes it in dyn_batch_size calls, which the transactional mode could not commit at all."""
    from pyspark.sql import functions as F

    root = f"//tmp/producers/{uuid.uuid4().hex[:12]}"
    with session_conf(spark, spark__yt__cluster=open_standin.uri), connect(open_standin.uri) as cluster:
        make_table(cluster, f"{root}/out", COPY_SCHEMA, tablets=1)
        df = (spark.readStream.format("rate-micro-batch").option("rowsPerBatch", 300_000)
              .option("numPartitions", 1).load()
              .select(F.concat(F.lit("r"), F.col("value").cast("string")).alias("data"), F.col("value").alias("n")))
        query = (df.writeStream.format("yt").option("path", f"{root}/out")
                 .option("producer_path", f"{root}/producer").option("create_producer", True)
                 .option("checkpointLocation", str(tmp_path / "checkpoint")).trigger(once=True).start())
        query.awaitTermination(timeout=540)
        written = ordered_rows(cluster, f"{root}/out")
        sessions = cluster.select_rows(f"{root}/producer")
    assert len(written) == len({r["n"] for r in written}) == 300_000
    assert [s["sequence_number"] % SEQUENCE_STRIDE for s in sessions] == [299_999]


class TestVersions:
    def test_a_cluster_before_24_1_is_refused_at_the_start_naming_the_version(self, standin, monkeypatch) -> None:
        """A proxy of YTsaurus before 24.1 lists no `push_queue_producer` among its commands (`/api/v4`)."""
        served = standin.state.commands.descriptors
        monkeypatch.setattr(standin.state.commands, "descriptors",
                            lambda: [d for d in served() if not d["name"].endswith("queue_producer")])
        options = SinkOptions.parse({"path": "//tmp/q", "cluster": standin.uri, "producer_path": "//tmp/p"}, {})
        with (connect(standin.uri, token=STANDIN_TOKEN) as cluster,
              pytest.raises(ClusterError, match=r"queue producers need YTsaurus 24\.1 or newer") as refused):
            prepare_producer(cluster, options)
        assert STANDIN_TOKEN not in str(refused.value)

    def test_the_client_requirement_starts_at_the_first_release_with_producers(self) -> None:
        """`ytsaurus-client` 0.13.21 is the first with the producer commands (0.13.20 has none); the installed one
        meets the requirement and has them."""
        import yt.wrapper

        declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
        [requirement] = [Requirement(d) for d in declared if Requirement(d).name == "ytsaurus-client"]
        assert Version("0.13.21") in requirement.specifier and Version("0.13.20") not in requirement.specifier
        assert Version(importlib.metadata.version("ytsaurus-client")) in requirement.specifier
        assert all(hasattr(yt.wrapper, name) for name in (
            "create_queue_producer_session", "push_queue_producer", "remove_queue_producer_session"))
