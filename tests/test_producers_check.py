"""The producers check (`opsd.checks.producers`): a producer-mode pipeline's sessions, epoch bumps, rows skipped as
written before and zombie attempts fenced off, read where the sink leaves them (through the embedded cluster and the
stand-in), counted once, on `/status` and the metrics; its pure steps on frozen facts."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pyarrow as pa
import pytest
import structlog
from prometheus_client import CollectorRegistry

from opsd.checks.producers.check import ProducersCheck
from opsd.checks.producers.collect import targets_for
from opsd.checks.producers.decide import decide
from opsd.checks.producers.evaluate import evaluate
from opsd.checks.producers.facts import ProducerFacts, ProducerTarget
from opsd.config.models import OpsdConfig
from opsd.config.thresholds import PRODUCER_FENCE_RECENT_SECONDS
from opsd.observe.recorder import Recorder
from opsd.observe.status import StatusStore
from opsd.results.producers import ProducerState, Session
from opsd.telemetry.metrics import Metrics
from streaming_core.cluster import Cluster, connect
from streaming_core.cluster.errors import ZombieEpochError
from streaming_core.options import SinkOptions
from streaming_core.producer_fences import Fence
from streaming_core.sink_producer import SEQUENCE_STRIDE, SessionPusher, TaskPosition, prepare_producer
from streaming_core.write_stats import WriteStats, record_write_stats
from tests.support.sink import COPY_SCHEMA, make_table
from tests.support.standin import STANDIN_TOKEN

TARGET = ProducerTarget("q", "local:///x", "//p", "//out", "abc", "batch", "//t")


def facts(sessions=(), stats=None, fences=(), batch=None, previous=None, problem=None, at=1000.0) -> ProducerFacts:
    return ProducerFacts(TARGET, at, tuple(sessions), stats, tuple(fences), batch, previous, problem)


def session(name: str, epoch: int, batch: int | None) -> Session:
    return Session(name, epoch, -1 if batch is None else batch * SEQUENCE_STRIDE, batch, 0, 0)


class TestPureSteps:
    def test_the_first_run_counts_what_the_cluster_holds_and_later_runs_the_changes(self) -> None:
        fence = Fence("abc-p0", 3, 7, 0, 0, 990.0)
        stats = WriteStats(producer_skipped_rows=5, batch_id=7, at=995.0)
        first = evaluate(facts([session("abc-p0", 4, 7), session("abc-p1", 4, 7)], stats, [fence], batch=6))
        assert (first.new.epoch_bumps, first.new.skipped_rows, first.new.fenced_zombies) == (8, 5, 1)
        again = evaluate(facts([session("abc-p0", 5, 8), session("abc-p1", 5, 8)], stats, [fence], batch=7,
                               previous=decide(first)))
        assert (again.new.epoch_bumps, again.new.skipped_rows, again.new_fences) == (2, 0, ())
        assert (again.counted.epoch_bumps, again.counted.skipped_rows, again.counted.fenced_zombies) == (10, 5, 1)
        removed = evaluate(facts([session("abc-p0", 0, None)], None, [fence], previous=decide(again)))
        assert removed.new.epoch_bumps == 0 and removed.epoch_total == 0, "sessions removed: the sum starts again"

    def test_a_failed_reading_counts_nothing_and_keeps_what_was_known(self) -> None:
        known = decide(evaluate(facts([session("abc-p0", 4, 7)], fences=[Fence("abc-p0", 3, 7, 0, 0, 990.0)])))
        failed = decide(evaluate(facts(previous=known, problem="no such producer")))
        assert failed.state is ProducerState.PROBLEM and failed.counted == known.counted
        assert failed.fences == known.fences and failed.epoch_total == known.epoch_total

    def test_a_recent_fence_is_a_warning_state_and_an_old_one_is_not(self) -> None:
        fence = Fence("abc-p0", 3, 7, 0, 0, 1000.0)
        assert decide(evaluate(facts(fences=[fence], at=1010.0))).state is ProducerState.ZOMBIE_FENCED
        late = 1000.0 + PRODUCER_FENCE_RECENT_SECONDS + 1
        assert decide(evaluate(facts(fences=[fence], at=late))).state is ProducerState.OK

    def test_sessions_holding_later_batches_than_the_query_are_ahead(self) -> None:
        sessions = [session("abc-p0", 1, 500), session("abc-p1", 1, 3), session("abc-p2", 1, None)]
        report = decide(evaluate(facts(sessions, batch=2)))
        assert report.state is ProducerState.SESSIONS_AHEAD and report.sessions_ahead == ("abc-p0",)
        assert decide(evaluate(facts(sessions))).sessions_ahead == (), "the query's batch unknown: nothing judged"


@pytest.fixture(params=["embedded", "ytsaurus"])
def backend(request: pytest.FixtureRequest, cluster_uri: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[Cluster]:
    monkeypatch.setenv("YT_TOKEN", STANDIN_TOKEN)
    uri = cluster_uri if request.param == "embedded" else request.getfixturevalue("standin").uri
    with connect(uri, token=STANDIN_TOKEN) as cluster:
        yield cluster


def rows(lo: int, hi: int) -> pa.Table:
    return pa.table({"data": [f"r{i}" for i in range(lo, hi)], "n": list(range(lo, hi))})


def test_sessions_skipped_rows_and_a_fenced_zombie_reach_status_and_metrics(backend: Cluster, tmp_path) -> None:
    """A query's task writes batch 3, is retried while the first attempt still runs (which is then fenced off at its
    next push), and batch 3 is replayed once more: the check finds the sessions, counts the epoch bumps, the rows
    skipped and the fence once, and `/status` shows them."""
    root = f"//tmp/producers-check/{uuid.uuid4().hex[:12]}"
    make_table(backend, f"{root}/in", COPY_SCHEMA)
    make_table(backend, f"{root}/out", COPY_SCHEMA)
    config = OpsdConfig.model_validate({"cluster": backend.uri, "pipelines": [
        {"name": "p", "checkpoint_location": str(tmp_path / "ckpt"),
         "source": {"format": "yt", "path": f"{root}/in", "options": {"consumer_path": f"{root}/consumer"}},
         "sink": {"format": "yt", "path": f"{root}/out",
                  "options": {"producer_path": f"{root}/producer", "create_producer": "true"}}},
        {"name": "plain", "source": {"format": "rate"}, "sink": {"format": "console"}}]})
    [target] = targets_for(config)
    options = SinkOptions.parse({"path": f"{root}/out", "cluster": backend.uri, "producer_path": f"{root}/producer",
                                 "create_producer": "true", "checkpointLocation": str(tmp_path / "ckpt"),
                                 "queryName": "p", "tuning_path": target.tuning_path}, {})
    prepare_producer(backend, options)
    zombie = SessionPusher(backend, options, TaskPosition(3, 0, 0))
    zombie.push_all(iter([(rows(0, 10), rows(0, 10))]), 10)
    retry = SessionPusher(backend, options, TaskPosition(3, 0, 1)).push_all(iter([(rows(0, 20), rows(0, 20))]), 20)
    record_write_stats(backend, target.tuning_path, WriteStats.total([retry], 3, 100.0))
    with pytest.raises(ZombieEpochError):
        zombie.push_chunk(rows(10, 20), rows(10, 20), 10, 10)
    recorder = Recorder(Metrics(CollectorRegistry()), StatusStore())
    recorder.status.update("p", last_batch_id=2)
    check = ProducersCheck(recorder, config)

    with structlog.testing.capture_logs() as logs:
        [report] = check.run()
    assert report.state is ProducerState.ZOMBIE_FENCED
    assert [(s.session, s.epoch, s.batch_id, s.attempt) for s in report.sessions] == [
        (f"{target.prefix}-p0", 1, 3, 1)]
    assert (report.last_fence.batch_id, report.last_fence.attempt, report.last_fence.epoch) == (3, 0, 0)
    assert [e["event"] for e in logs if e["event"].startswith("producer_")] == [
        "producer_zombie_fenced_seen", "producer_state_changed"]

    def sample(name: str) -> float | None:
        return recorder.metrics.registry.get_sample_value(name, {"query": "p"})

    assert (sample("opsd_producer_sessions"), sample("opsd_producer_epoch_bumps_total"),
            sample("opsd_producer_skipped_rows_total"), sample("opsd_producer_fenced_zombies_total"),
            sample("opsd_producer_sessions_ahead")) == (1, 1, 10, 1, 0)

    replay = SessionPusher(backend, options, TaskPosition(3, 0, 2)).push_all(iter([(rows(0, 20), rows(0, 20))]), 20)
    record_write_stats(backend, target.tuning_path, WriteStats.total([replay], 3, 200.0))
    check.run()
    assert (sample("opsd_producer_epoch_bumps_total"), sample("opsd_producer_skipped_rows_total"),
            sample("opsd_producer_fenced_zombies_total")) == (2, 30, 1), "the fence is counted once"
    shown = recorder.status.to_json()["queries"]["p"]["producers"]
    assert shown["state"] == "zombie_fenced" and shown["fenced_zombies"] == 1
    assert shown["last_batch"]["skipped_rows"] == 20 and shown["sessions"][0]["batch_id"] == 3
    assert shown["counted"] == {"epoch_bumps": 2, "skipped_rows": 30, "fenced_zombies": 1}
