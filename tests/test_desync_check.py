"""The scheduled desync check: targets from the config, states into metrics, `/status` and logs, heals where enabled,
attached queries found from their progress events."""

from __future__ import annotations

from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry
from structlog.testing import capture_logs

from opsd.checks.desync.check import DesyncCheck
from opsd.checks.desync.evaluate import evaluate
from opsd.collect.positions import PositionsCollector, QueryTarget, targets_for
from opsd.config.models import OpsdConfig
from opsd.observe.progress import BatchProgress, SourceProgress
from opsd.observe.recorder import Recorder
from opsd.observe.status import StatusStore
from opsd.results.desync import HealOutcome
from opsd.telemetry.metrics import Metrics
from streaming_core.offsets import QueueOffset
from tests.support.checkpoint import job_with_checkpoint, offset_line


@pytest.fixture
def registry() -> CollectorRegistry:
    return CollectorRegistry()


@pytest.fixture
def recorder(registry: CollectorRegistry) -> Recorder:
    return Recorder(Metrics(registry), StatusStore(), clock=lambda: 1000.0)


@pytest.fixture
def lagging(yt, yt_root: str, tmp_path: Path) -> tuple[str, str, str]:
    """An idle query's checkpoint (batches 0, 1 committed) with its consumer at the end of batch 0."""
    return job_with_checkpoint(yt, yt_root, tmp_path / "cp", {0: {0: 9, 1: 9}, 1: {0: 19, 1: 19}}, committed=1,
                               consumer_at=10)


def check_of(recorder: Recorder, cluster_uri: str, targets=(), progress=None) -> DesyncCheck:
    return DesyncCheck(recorder, PositionsCollector(cluster_uri, targets, progress))


def status_of(recorder: Recorder, query: str) -> dict:
    """The query's entry of the `/status` document."""
    return recorder.status.to_json()["queries"][query]


def state(registry: CollectorRegistry, q: str, partition: str, name: str) -> float | None:
    return registry.get_sample_value("opsd_desync_state", {"query": "job", "queue": q, "partition": partition,
                                                           "state": name})


def source_progress(start: str | None, end: str) -> SourceProgress:
    """A yt source's offsets in a progress event (the JSON Spark reports)."""
    return SourceProgress("yt", 0, QueueOffset.from_progress(start), QueueOffset.from_progress(end))


def batch_progress(batch_id: int, *sources: SourceProgress) -> BatchProgress:
    return BatchProgress("attached", "id", "run", batch_id, 0.0, sources=sources)


def test_states_reach_metrics_status_and_a_log_line_once_per_change(yt, cluster_uri, lagging, recorder,
                                                                    registry) -> None:
    q, c, location = lagging
    check = check_of(recorder, cluster_uri, [QueryTarget("job", location)])

    with capture_logs() as logs:
        check.run()
        check.run()
        for p in (0, 1):
            yt.advance_consumer(c, q, p, None, 20)
        check.run()

    changes = [(e["partition"], e["previous"], e["state"]) for e in logs if e["event"] == "desync_state_changed"]
    assert changes == [(0, None, "lagging_one_batch"), (1, None, "lagging_one_batch"),
                       (0, "lagging_one_batch", "in_sync"), (1, "lagging_one_batch", "in_sync")]
    assert (state(registry, q, "0", "in_sync"), state(registry, q, "0", "lagging_one_batch")) == (1, 0)
    assert registry.get_sample_value("opsd_desync_rows", {"query": "job", "queue": q, "partition": "1"}) == 0
    assert status_of(recorder, "job")["desync"][q]["state"] == "in_sync"


def test_an_enabled_heal_advances_an_idle_lagging_consumer_and_is_counted(yt, cluster_uri, lagging, recorder,
                                                                          registry) -> None:
    q, c, location = lagging
    check_of(recorder, cluster_uri, [QueryTarget("job", location, q, c, heal=True)]).run()

    assert yt.get_consumer_offsets(c, q) == {0: 20, 1: 20}
    assert registry.get_sample_value("opsd_desync_heals_total",
                                     {"query": "job", "queue": q, "outcome": "healed"}) == 1
    assert status_of(recorder, "job")["desync"][q]["last_heal"] == {
        "outcome": "healed", "at": 1000.0, "moves": {"0": [10, 20], "1": [10, 20]}}


def test_a_watched_query_is_not_healed_by_default_and_an_unreadable_checkpoint_is_its_problem(
        yt, cluster_uri, lagging, recorder, tmp_path) -> None:
    q, c, location = lagging
    config = OpsdConfig.model_validate({
        "pipelines": [{"name": "run", "source": {"path": q, "options": {"consumer_path": f"{c}_run"}},
                       "sink": {"format": "console"}, "checkpoint_location": str(tmp_path / "missing")}],
        "watch": [{"name": "spyt-job", "checkpoint_location": location, "queue": q, "consumer": c}],
    })
    targets = targets_for(config)
    assert [(t.query, t.heal) for t in targets] == [("run", True), ("spyt-job", False)]
    (tmp_path / "missing" / "offsets").mkdir(parents=True)
    (tmp_path / "missing" / "offsets" / "0").write_text("garbage")

    check_of(recorder, cluster_uri, targets).run()

    assert yt.get_consumer_offsets(c, q) == {0: 10, 1: 10}
    assert status_of(recorder, "spyt-job")["desync"][q]["state"] == "lagging_one_batch"
    assert "expected offset log version v1" in status_of(recorder, "run")["desync"][q]["problem"]


def test_attached_queries_are_judged_from_their_last_batch_with_data(yt, cluster_uri, lagging, recorder) -> None:
    q, c, _ = lagging

    def source(start: dict | None, end: dict) -> SourceProgress:
        return source_progress(start and offset_line(q, start, c), offset_line(q, end, c))

    progress = {"attached": [
        batch_progress(0, source(None, {0: 9, 1: 9})),
        batch_progress(1, source({0: 9, 1: 9}, {0: 19, 1: 19})),
        batch_progress(1, source({0: 19, 1: 19}, {0: 19, 1: 19})),  # idle
    ]}

    check_of(recorder, cluster_uri, progress=lambda: progress).run()

    view = status_of(recorder, "attached")["desync"][q]
    assert (view["state"], view["source"], view["committed_batch"]) == ("lagging_one_batch", "progress", 1)


def test_an_attached_query_that_cannot_be_read_is_its_own_problem_only(yt, cluster_uri, lagging, recorder) -> None:
    q, c, _ = lagging
    end = source_progress(offset_line(q, {0: 9, 1: 9}, c), offset_line(q, {0: 19, 1: 19}, c))
    gone = source_progress(None, offset_line("//no/such/queue", {0: 4}, c))
    progress = {"gone": [batch_progress(0, gone)], "fine": [batch_progress(1, end)]}

    check_of(recorder, cluster_uri, progress=lambda: progress).run()

    assert "//no/such/queue" in status_of(recorder, "gone")["desync"][""]["problem"]
    assert status_of(recorder, "fine")["desync"][q]["state"] == "lagging_one_batch"


@pytest.mark.hostile
def test_a_checkpoint_damaged_between_the_read_and_the_heal_fails_that_heal_only(yt, cluster_uri, lagging, recorder,
                                                                                 registry) -> None:
    q, c, location = lagging
    check = check_of(recorder, cluster_uri, [QueryTarget("job", location, q, c, heal=True)])
    reading = check.positions.read()
    [facts], target = reading.queues, reading.targets["job"]
    (Path(location) / "offsets" / "\u0662").write_text("a batch file name Spark never writes")

    with capture_logs() as logs:
        result = check.heal(yt, evaluate(facts), target)

    assert result.outcome == HealOutcome.FAILED and yt.get_consumer_offsets(c, q) == {0: 10, 1: 10}
    [failed] = [e for e in logs if e["event"] == "desync_heal_failed"]
    assert failed["error"].startswith("CheckpointError: ") and f"{location}/offsets/\u0662" in failed["error"]
    assert registry.get_sample_value("opsd_desync_heals_total", {"query": "job", "queue": q, "outcome": "failed"}) == 1
