"""The vital-consumer audit on the embedded cluster: a consumer registered as vital for a queue a query reads (its own
or another job's) that stands still while rows wait is measured from the first reading that saw it so, named under
every query reading the queue, exported, and judged against the level a person must act at."""

from __future__ import annotations

import pytest
from prometheus_client import CollectorRegistry

from opsd.checks.trim.collect import collect as collect_trim
from opsd.checks.vital.check import VitalConsumerCheck
from opsd.checks.vital.facts import VitalFacts
from opsd.collect.positions import PositionsCollector, QueryTarget, Reading, with_vital
from opsd.config.thresholds import VITAL_CONSUMER_STALLED_SECONDS
from opsd.observe.recorder import Recorder
from opsd.observe.status import StatusStore, jsonable
from opsd.results.positions import PartitionPositions, QueryPositions, QueuePositions, QueueRetention, VitalConsumer
from opsd.telemetry.metrics import Metrics
from tests.support.retention import Clock, retention_job


@pytest.fixture
def recorder() -> Recorder:
    return Recorder(Metrics(CollectorRegistry()), StatusStore())


def stalled_seconds(recorder: Recorder, query: str, queue: str, consumer: str) -> float | None:
    return recorder.metrics.registry.get_sample_value(
        "opsd_vital_consumer_stalled_seconds", {"query": query, "queue": queue, "consumer": consumer})


def test_another_jobs_vital_consumer_standing_still_while_rows_wait_is_found_under_the_query(
        yt, yt_root, tmp_path, recorder) -> None:
    job = retention_job(yt, yt_root, tmp_path / "cp", rows=40, other_at=5)
    clock = Clock()
    check = VitalConsumerCheck(recorder, PositionsCollector(yt.uri, [QueryTarget("job", job.location)], clock=clock))

    [first] = check.run()
    clock.advance(VITAL_CONSUMER_STALLED_SECONDS - 1)
    job.produce(yt, 10)
    [still] = check.run()
    clock.advance(1)
    [stalled] = check.run()

    assert (first.stalled_seconds, first.waiting_rows, first.since) == (0.0, 30, 1_000_000.0)
    assert (still.stalled_seconds, still.stalled, still.waiting_rows) == (VITAL_CONSUMER_STALLED_SECONDS - 1, False, 50)
    assert (stalled.consumer, stalled.stalled, stalled.offsets) == (job.other, True, {0: 5, 1: 5})
    assert stalled_seconds(recorder, "job", job.queue, job.other) == VITAL_CONSUMER_STALLED_SECONDS
    [audit] = recorder.status.get("job").vital_consumers
    assert (audit.own, jsonable(audit)["stalled"]) == (False, True)


def test_a_move_or_nothing_to_wait_for_is_not_standing_still(yt, yt_root, tmp_path, recorder) -> None:
    job = retention_job(yt, yt_root, tmp_path / "cp", rows=40, other_at=5)
    clock = Clock()
    check = VitalConsumerCheck(recorder, PositionsCollector(yt.uri, [QueryTarget("job", job.location)], clock=clock))
    check.run()
    clock.advance(600)
    job.other_reads_to(yt, 6)
    [moved] = check.run()
    clock.advance(600)
    job.other_reads_to(yt, 20)
    [caught_up] = check.run()
    clock.advance(600)
    [idle] = check.run()

    assert (moved.stalled_seconds, moved.since) == (0.0, 1_000_600.0)
    assert (caught_up.waiting_rows, caught_up.stalled_seconds, idle.stalled_seconds) == (0, 0.0, 0.0)


def test_its_own_vital_consumer_counts_and_one_made_not_vital_is_no_longer_exported(
        yt, yt_root, tmp_path, recorder) -> None:
    job = retention_job(yt, yt_root, tmp_path / "cp", rows=40, other_vital=False)
    yt.register_queue_consumer(job.queue, job.consumer, vital=True)
    clock = Clock()
    check = VitalConsumerCheck(recorder, PositionsCollector(yt.uri, [QueryTarget("job", job.location)], clock=clock))
    check.run()
    clock.advance(VITAL_CONSUMER_STALLED_SECONDS)
    [own] = check.run()
    assert (own.consumer, own.stalled, recorder.status.get("job").vital_consumers[0].own) == (job.consumer, True, True)

    yt.register_queue_consumer(job.queue, job.consumer)  # registered again, not vital
    assert check.run() == []
    assert stalled_seconds(recorder, "job", job.queue, job.consumer) == 0
    assert recorder.status.get("job").vital_consumers == ()


def test_a_queue_read_by_two_queries_has_its_retention_read_once_per_cycle_and_audited_under_both(
        yt, yt_root, tmp_path, recorder, monkeypatch) -> None:
    from streaming_core.cluster.embedded import EmbeddedCluster
    from tests.support.checkpoint import write_checkpoint

    job = retention_job(yt, yt_root, tmp_path / "cp", rows=40, other_at=5)
    second = tmp_path / "cp2"
    write_checkpoint(second, job.queue, {0: {0: 3, 1: 3}}, 0, consumer=job.other)
    listed = []
    real = EmbeddedCluster.list_queue_consumer_registrations
    monkeypatch.setattr(EmbeddedCluster, "list_queue_consumer_registrations",
                        lambda self, **kw: listed.append(kw) or real(self, **kw))
    positions = PositionsCollector(yt.uri, [QueryTarget("job", job.location), QueryTarget("other", str(second))],
                                   clock=Clock())

    [audit] = VitalConsumerCheck(recorder, positions).run()

    assert (audit.consumer, listed) == (job.other, [{"queue_path": job.queue}])
    assert [(a.consumer, a.own) for a in recorder.status.get("job").vital_consumers] == [(job.other, False)]
    assert [(a.consumer, a.own) for a in recorder.status.get("other").vital_consumers] == [(job.other, True)]


def test_the_audit_the_trim_forecast_and_the_reading_tell_the_querys_own_consumer_by_one_rule() -> None:
    """A consumer named with a trailing slash in one place and without in another is the same consumer everywhere."""
    retention = QueueRetention("//q", vital=(VitalConsumer("//c/", None, {0: 3}),))
    positions = QueuePositions("job", "//q", "//c", "cp", 1, 1,
                               partitions=(PartitionPositions(0, 3, 2, None, 3, 5, 0),))
    reading = Reading(1.0, (QueryPositions("job", 1.0, (positions,)),), retention={"//q": retention})

    assert with_vital(positions, {"//q": retention}).vital is True
    assert [p.consumer_vital for f in collect_trim(reading, lambda q: None) for p in f.partitions] == [True]
    assert VitalFacts("//q", "//c/", 1.0, {0: 3}, {0: 5}, {"job": "//c"}).own("job")
    assert not VitalFacts("//q", "//other", 1.0, {0: 3}, {0: 5}, {"job": "//c"}).own("job")
