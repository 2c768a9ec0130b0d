"""The status store and the readiness verdict served by /readyz."""

from __future__ import annotations

import json
import threading
from dataclasses import replace

import pytest

from opsd.observe.progress import BatchSummary
from opsd.observe.readiness import ProgressPolicy, evaluate_readiness
from opsd.observe.status import QueryStatus, StatusStore

POLICY = ProgressPolicy(stall_factor=3.0, min_window_seconds=60.0)
NOW = 10_000.0


def running(**changes: object) -> QueryStatus:
    base = QueryStatus(name="clicks", id="id-1", active=True, started_at=NOW - 500, last_heartbeat_at=NOW - 5)
    return replace(base, **changes)  # type: ignore[arg-type]


def reasons(*statuses: QueryStatus) -> list[str]:
    """Every reason a query is not ready or degraded."""
    readiness = evaluate_readiness(statuses, NOW, POLICY)
    return [item.reason for item in (*readiness.not_ready, *readiness.degraded)]


def test_no_known_query_is_ready() -> None:
    assert evaluate_readiness([], NOW, POLICY).ready


def test_active_query_heard_from_recently_is_ready() -> None:
    assert evaluate_readiness([running()], NOW, POLICY).ready


def test_silent_query_is_degraded_and_the_reason_names_the_window() -> None:
    readiness = evaluate_readiness([running(last_heartbeat_at=NOW - 61)], NOW, POLICY)

    assert readiness.ready
    [item] = readiness.degraded
    assert (item.query, item.reason) == ("clicks", "no_progress")
    assert "allowed 60.0s" in item.detail


def test_slow_trigger_widens_the_progress_window() -> None:
    assert reasons(running(last_heartbeat_at=NOW - 100, trigger_interval_seconds=40.0)) == []
    assert reasons(running(last_heartbeat_at=NOW - 121, trigger_interval_seconds=40.0)) == ["no_progress"]


def test_before_first_event_the_start_time_counts() -> None:
    assert reasons(running(last_heartbeat_at=None, started_at=NOW - 10)) == []
    assert reasons(running(last_heartbeat_at=None, started_at=NOW - 100)) == ["no_progress"]


@pytest.mark.parametrize(
    ("status", "reason"),
    [
        (running(active=False, terminated_at=NOW, exception="x", exception_class="ValueError"), "failed"),
        (running(crash_loop=True), "crash_loop"),
        (running(active=False, terminated_at=NOW, permanent_failure="sink: //t does not exist"), "failed_permanently"),
    ],
)
def test_a_failing_query_leaves_the_daemon_ready_and_is_listed_as_degraded(status: QueryStatus, reason: str) -> None:
    readiness = evaluate_readiness([status], NOW, POLICY)

    assert readiness.ready
    assert [item.reason for item in readiness.degraded] == [reason]


def test_a_query_not_brought_up_yet_makes_the_daemon_not_ready() -> None:
    readiness = evaluate_readiness([running(name="up"), QueryStatus(name="clicks")], NOW, POLICY)

    assert not readiness.ready
    assert [(item.query, item.reason) for item in readiness.not_ready] == [("clicks", "not_started")]


def test_query_stopped_cleanly_does_not_block_readiness() -> None:
    assert reasons(running(active=False, terminated_at=NOW - 1000)) == []


def test_one_bad_query_among_good_ones_is_reported_alone() -> None:
    good = running(name="good")
    bad = running(name="bad", crash_loop=True)

    readiness = evaluate_readiness([good, bad], NOW, POLICY)

    assert readiness.to_json() == {
        "ready": True,
        "not_ready": [],
        "degraded": [{"query": "bad", "reason": "crash_loop", "detail": ""}],
    }


def test_update_creates_then_changes_a_query_and_indexes_its_id() -> None:
    store = StatusStore()
    store.update("clicks", id="id-1", active=True)
    updated = store.update("clicks", last_batch_id=4)

    assert (updated.active, updated.last_batch_id) == (True, 4)
    assert store.name_for("id-1") == "clicks"
    assert store.name_for("other") == "other"


def test_status_document_is_json() -> None:
    store = StatusStore()
    store.update("b", active=True, last_progress=BatchSummary(1, durations_seconds={"addBatch": 0.5}))
    store.update("a")

    document = json.loads(json.dumps(store.to_json()))

    assert list(document["queries"]) == ["a", "b"]
    assert document["queries"]["b"]["last_progress"]["batch_id"] == 1
    assert document["queries"]["b"]["last_progress"]["durations_seconds"] == {"addBatch": 0.5}


def test_concurrent_updates_are_not_lost() -> None:
    store = StatusStore()

    def work(worker: int) -> None:
        for i in range(500):
            store.update(f"q{worker}-{i}", active=True)
            store.update("shared", last_batch_id=i)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert len(store.snapshot()) == 8 * 500 + 1


def test_a_query_restarted_after_a_long_backoff_is_judged_from_its_new_start() -> None:
    """The previous run's last heartbeat (an hour ago) must not outweigh the new run's start a moment ago."""
    restarted = running(last_heartbeat_at=NOW - 3600, last_progress_at=NOW - 3600, started_at=NOW - 5)
    assert reasons(restarted) == []
