"""Queue Agent signals (`opsd.checks.queue_agent`): the agent's `@queue_status`, `@queue_partitions` and
`@queue_consumer_partitions` as the YTsaurus stand-in serves them (shaped as the agent builds them), exported with
the query's labels; opsd's own measurements where they are not served (the embedded cluster has no Queue Agent)."""

from __future__ import annotations

import time
import uuid
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry
from structlog.testing import capture_logs

from opsd.checks.queue_agent.check import QueueAgentCheck
from opsd.checks.queue_agent.collect import collect
from opsd.checks.queue_agent.evaluate import evaluate
from opsd.checks.queue_agent.facts import Served
from opsd.collect.positions import PositionsCollector, QueryTarget, Reading, collect_target
from opsd.observe.recorder import Recorder
from opsd.observe.status import StatusStore
from opsd.results.positions import PartitionPositions, QueryPositions, QueuePositions
from opsd.results.queue_agent import Disposition
from opsd.telemetry.metrics import Metrics
from streaming_core.cluster import Cluster, ClusterError, connect
from streaming_core.cluster.base import QUEUE_CONSUMER_PARTITIONS, QUEUE_PARTITIONS, QUEUE_STATUS
from streaming_core.cluster.embedded import EmbeddedCluster
from tests.support.checkpoint import job_with_checkpoint
from tests.support.standin import STANDIN_TOKEN

# -- evaluate (pure) --------------------------------------------------------------------------------------------


def positions(*partitions: tuple[int, int, int]) -> QueuePositions:
    """A queue whose partitions are (consumer offset, row count, trimmed row count)."""
    return QueuePositions("job", "//q", "//c", "/cp", 1, None, tuple(
        PartitionPositions(i, offset, None, None, offset, rows, trimmed)
        for i, (offset, rows, trimmed) in enumerate(partitions)))


def rate(value: float) -> dict[str, float]:
    return {"current": value * 2, "1m_raw": value, "1m": value, "1h": value / 2, "1d": value / 3}


def test_served_attributes_are_the_signals() -> None:
    served = Served("primary://q", {"write_row_count_rate": rate(7.0), "partition_count": 2},
                    [{"write_row_count_rate": rate(3.0)}, {"write_row_count_rate": rate(4.0)}],
                    {"primary://q": [
                        {"disposition": "pending_consumption", "unread_row_count": 5, "processing_lag": 2500},
                        {"disposition": "up_to_date", "unread_row_count": 0, "processing_lag": 0}]})

    signals = evaluate(positions((0, 9, 0), (4, 4, 0)), served, {}, 100.0)

    assert (signals.served, signals.write_rows_per_second) == (True, 7.0)
    assert [(p.write_rows_per_second, p.unread_rows, p.disposition, p.processing_lag_seconds)
            for p in signals.partitions] == [(3.0, 5, Disposition.PENDING_CONSUMPTION, 2.5),
                                             (4.0, 0, Disposition.UP_TO_DATE, 0.0)]


def test_without_the_agent_opsds_own_measurements_stand_in() -> None:
    previous = {("//q", 0): (90.0, 3), ("//q", 1): (90.0, 10)}
    for served in (Served("primary://q"),  # not served at all
                   Served("primary://q", {"error": {"code": 1, "message": "not watched"}},
                          [{"error": {"message": "x"}}, {"error": {"message": "x"}}], {"primary://other": []})):
        signals = evaluate(positions((2, 3, 3), (30, 20, 0), (4, 8, 0)), served, previous, 100.0)
        assert signals.served is False
        assert [(p.write_rows_per_second, p.unread_rows, p.disposition) for p in signals.partitions] == [
            (0.0, 1, Disposition.EXPIRED), (1.0, 0, Disposition.AHEAD), (None, 4, Disposition.PENDING_CONSUMPTION)]
        assert signals.write_rows_per_second is None  # one partition's rate is not known yet


# -- the check, on both backends ---------------------------------------------------------------------------------


@pytest.fixture
def registry() -> CollectorRegistry:
    return CollectorRegistry()


def sample(registry: CollectorRegistry, name: str, queue: str, partition: int, **labels: str) -> float | None:
    return registry.get_sample_value(name, {"query": "job", "queue": queue, "partition": str(partition), **labels})


@pytest.fixture
def standin_uri(standin, monkeypatch) -> str:
    monkeypatch.setenv("YT_TOKEN", STANDIN_TOKEN)
    return standin.uri


def job(cluster: Cluster, tmp_path: Path) -> tuple[str, str, str]:
    root = f"//tmp/qa{uuid.uuid4().hex[:12]}"
    cluster.create("map_node", root, recursive=True)
    return job_with_checkpoint(cluster, root, tmp_path / "cp", {0: {0: 9, 1: 9}, 1: {0: 19, 1: 19}}, committed=1,
                               consumer_at=10)


def check_for(uri: str, location: str, registry: CollectorRegistry, clock) -> QueueAgentCheck:
    recorder = Recorder(Metrics(registry), StatusStore(), clock=clock)
    return QueueAgentCheck(recorder, PositionsCollector(uri, [QueryTarget("job", location)], clock=clock))


def test_the_embedded_cluster_serves_nothing_and_opsd_measures_for_itself(yt, cluster_uri, tmp_path,
                                                                           registry) -> None:
    q, c, location = job(yt, tmp_path)
    now = [1000.0]
    check = check_for(cluster_uri, location, registry, lambda: now[0])
    assert yt.queue_agent_attribute(q, QUEUE_STATUS) is None

    check.run()
    yt.insert_rows(q, [{"data": "x", "n": i} for i in range(20)])  # 10 more rows per partition
    now[0] += 5
    check.run()

    assert registry.get_sample_value("opsd_queue_agent_served", {"query": "job", "queue": q}) == 0
    assert sample(registry, "opsd_queue_write_rows_per_second", q, 0) == 2.0
    assert sample(registry, "opsd_consumer_unread_rows", q, 1) == 20
    assert sample(registry, "opsd_consumer_disposition", q, 0, disposition="pending_consumption") == 1

    for p in (0, 1):
        yt.advance_consumer(c, q, p, None, 30)
    now[0] += 5
    check.run()
    assert sample(registry, "opsd_consumer_disposition", q, 0, disposition="pending_consumption") == 0
    assert sample(registry, "opsd_consumer_disposition", q, 0, disposition="up_to_date") == 1


def test_through_the_stand_in_the_queue_agents_signals_are_exported_three_reads_per_cycle(
        standin, standin_uri, tmp_path, registry) -> None:
    with connect(standin_uri) as cluster:
        q, c, location = job(cluster, tmp_path)
        check = check_for(standin_uri, location, registry, time.time)
        check.run()
        for p in (0, 1):
            cluster.advance_consumer(c, q, p, None, 20)
        cluster.insert_rows(q, [{"data": "x", "n": i} for i in range(20)])
        time.sleep(0.2)
        before = len(standin.served)
        check.run()
        reads = [s for s in standin.served[before:] if s.command == "get" and "/@queue" in s.path]
        served = cluster.queue_agent_attribute(c, QUEUE_CONSUMER_PARTITIONS)[f"{cluster.name}:{q}"]
        rates = [p["write_row_count_rate"]["1m"] for p in cluster.queue_agent_attribute(q, QUEUE_PARTITIONS)]

    assert sorted(s.path.rsplit("/@", 1)[1] for s in reads) == ["queue_consumer_partitions", "queue_partitions",
                                                                 "queue_status"]
    assert registry.get_sample_value("opsd_queue_agent_served", {"query": "job", "queue": q}) == 1
    assert [p["disposition"] for p in served] == ["pending_consumption", "pending_consumption"]
    assert sample(registry, "opsd_consumer_disposition", q, 1, disposition="pending_consumption") == 1
    assert sample(registry, "opsd_consumer_unread_rows", q, 0) == served[0]["unread_row_count"] == 10
    assert 0 < sample(registry, "opsd_consumer_processing_lag_seconds", q, 0) <= served[0]["processing_lag"] / 1000
    assert sample(registry, "opsd_queue_write_rows_per_second", q, 0) > 0 and rates[0] > 0


def test_a_consumer_is_no_queue_for_the_agent(standin_cluster: Cluster, tmp_path) -> None:
    _, c, _ = job(standin_cluster, tmp_path)
    assert standin_cluster.queue_agent_attribute(c, QUEUE_STATUS) is None


def test_a_read_that_fails_is_logged_and_leaves_opsds_own_measurements(yt, cluster_uri, tmp_path) -> None:
    q, c, location = job(yt, tmp_path)

    class Unavailable(EmbeddedCluster):
        def queue_agent_attribute(self, path: str, name: str):
            raise ClusterError(f"{path}: the Queue Agent is unavailable")

    cluster = Unavailable(cluster_uri.removeprefix("local://"))
    queues = tuple(collect_target(cluster, QueryTarget("job", location)))
    with capture_logs() as logs:
        served = collect(cluster, Reading(1.0, (QueryPositions("job", 1.0, queues),)))

    assert served[(q, c)] == Served(f"{cluster.name}:{q}")
    assert [e["attribute"] for e in logs if e["event"] == "queue_agent_read_failed"] == [
        QUEUE_STATUS, QUEUE_PARTITIONS, QUEUE_CONSUMER_PARTITIONS]
    assert evaluate(queues[0], served[(q, c)], {}, 1.0).served is False
