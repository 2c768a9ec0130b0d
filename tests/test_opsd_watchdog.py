"""The stalled-query watchdog: no progress within k trigger intervals while data waits."""

from __future__ import annotations

from dataclasses import replace

from prometheus_client import CollectorRegistry
from structlog.testing import capture_logs

from opsd.checks.health.check import Watchdog
from opsd.checks.health.evaluate import is_stalled
from opsd.observe.readiness import ProgressPolicy
from opsd.observe.recorder import Recorder
from opsd.observe.status import QueryStatus, StatusStore
from opsd.telemetry.metrics import Metrics

POLICY = ProgressPolicy(stall_factor=3.0, min_window_seconds=10.0)
NOW = 5_000.0


def status(**changes: object) -> QueryStatus:
    base = QueryStatus(
        name="clicks", active=True, started_at=NOW - 1000, last_progress_at=NOW - 31, trigger_interval_seconds=10.0
    )
    return replace(base, **changes)  # type: ignore[arg-type]


def test_no_progress_for_k_intervals_with_backlog_is_a_stall() -> None:
    assert is_stalled(status(), backlog_rows=5, now=NOW, policy=POLICY)


def test_progress_within_k_intervals_is_not_a_stall() -> None:
    assert not is_stalled(status(last_progress_at=NOW - 29), backlog_rows=5, now=NOW, policy=POLICY)


def test_idle_query_without_backlog_is_not_a_stall() -> None:
    assert not is_stalled(status(), backlog_rows=0, now=NOW, policy=POLICY)


def test_unknown_backlog_is_not_evidence_of_a_stall() -> None:
    assert not is_stalled(status(), backlog_rows=None, now=NOW, policy=POLICY)


def test_stopped_query_is_not_stalled() -> None:
    assert not is_stalled(status(active=False), backlog_rows=5, now=NOW, policy=POLICY)


def test_query_that_never_finished_a_batch_is_judged_from_its_start() -> None:
    assert is_stalled(status(last_progress_at=None, started_at=NOW - 31), backlog_rows=5, now=NOW, policy=POLICY)
    assert not is_stalled(status(last_progress_at=None, started_at=NOW - 5), backlog_rows=5, now=NOW, policy=POLICY)


def test_unknown_trigger_interval_falls_back_to_the_minimum_window() -> None:
    quiet = status(trigger_interval_seconds=None, last_progress_at=NOW - 11)
    assert is_stalled(quiet, backlog_rows=5, now=NOW, policy=POLICY)


def test_check_sets_and_clears_the_stalled_gauge_and_logs_once() -> None:
    registry = CollectorRegistry()
    store = StatusStore()
    recorder = Recorder(Metrics(registry), store)
    clock = [NOW]
    store.update("clicks", active=True, started_at=NOW - 100, last_progress_at=NOW - 100, backlog_rows=42)
    watchdog = Watchdog(recorder, POLICY, clock=lambda: clock[0])

    with capture_logs() as logs:
        assert watchdog.run() == {"clicks": True}
        watchdog.run()
    assert registry.get_sample_value("opsd_query_stalled", {"query": "clicks"}) == 1
    assert [entry["event"] for entry in logs] == ["query_stalled"]

    store.update("clicks", last_progress_at=NOW)
    assert watchdog.run() == {"clicks": False}
    assert registry.get_sample_value("opsd_query_stalled", {"query": "clicks"}) == 0


def test_a_query_restarted_after_a_long_backoff_is_not_stalled_by_its_previous_runs_progress() -> None:
    restarted = status(last_progress_at=NOW - 3600, started_at=NOW - 5)
    assert not is_stalled(restarted, backlog_rows=5, now=NOW, policy=POLICY)
    assert is_stalled(status(last_progress_at=NOW - 3600, started_at=NOW - 31), backlog_rows=5, now=NOW,
                      policy=POLICY)
