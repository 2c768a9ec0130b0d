"""Periodic checks: counted, timed, never overlapping, and failures logged and counted, never raised."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest
from prometheus_client import CollectorRegistry
from structlog.testing import capture_logs

from opsd.checks.scheduler import CheckScheduler
from opsd.telemetry.metrics import Metrics
from tests.support.wait import wait_until


@pytest.fixture
def registry() -> CollectorRegistry:
    return CollectorRegistry()


@pytest.fixture
def checks(registry: CollectorRegistry) -> Iterator[CheckScheduler]:
    scheduler = CheckScheduler(Metrics(registry))
    yield scheduler
    scheduler.shutdown(wait=False)


def test_successful_run_is_counted_and_timed(checks: CheckScheduler, registry) -> None:
    assert checks.run_check("desync", lambda: None)

    assert registry.get_sample_value("opsd_check_runs_total", {"check": "desync"}) == 1
    assert registry.get_sample_value("opsd_check_errors_total", {"check": "desync"}) is None
    assert registry.get_sample_value("opsd_check_duration_seconds_count", {"check": "desync"}) == 1


def test_failing_run_is_logged_and_counted_not_raised(checks: CheckScheduler, registry) -> None:
    def broken() -> None:
        raise RuntimeError("cluster unreachable")

    with capture_logs() as logs:
        assert not checks.run_check("desync", broken)

    assert registry.get_sample_value("opsd_check_errors_total", {"check": "desync"}) == 1
    assert registry.get_sample_value("opsd_check_duration_seconds_count", {"check": "desync"}) == 1
    [entry] = logs
    assert (entry["event"], entry["check"], entry["log_level"]) == ("check_failed", "desync", "error")
    assert entry["exc_info"] is True


def test_scheduled_check_runs_repeatedly_and_survives_its_failures(checks: CheckScheduler, registry) -> None:
    runs: list[float] = []

    def flaky() -> None:
        runs.append(time.monotonic())
        raise ValueError("always")

    checks.add_check("flaky", flaky, interval_seconds=0.1)
    checks.start()
    wait_until(lambda: len(runs) >= 3, 10, "three runs", interval=0.05)

    assert len(runs) >= 3
    assert registry.get_sample_value("opsd_check_errors_total", {"check": "flaky"}) >= 3


def test_runs_of_one_check_never_overlap(checks: CheckScheduler) -> None:
    active = 0
    most_active = 0
    lock = threading.Lock()
    finished = threading.Event()
    count = 0

    def slow() -> None:
        nonlocal active, most_active, count
        with lock:
            active += 1
            most_active = max(most_active, active)
        time.sleep(0.35)
        with lock:
            active -= 1
            count += 1
            if count >= 2:
                finished.set()

    checks.add_check("slow", slow, interval_seconds=0.1)
    job = checks.scheduler.get_job("slow")
    assert (job.max_instances, job.coalesce) == (1, True)
    checks.start()

    assert finished.wait(10)
    assert most_active == 1


def test_adding_a_check_twice_replaces_it(checks: CheckScheduler) -> None:
    checks.add_check("watchdog", lambda: None, interval_seconds=5)
    checks.add_check("watchdog", lambda: None, interval_seconds=7)

    assert [job.id for job in checks.scheduler.get_jobs()] == ["watchdog"]


def test_non_positive_interval_is_rejected(checks: CheckScheduler) -> None:
    with pytest.raises(ValueError, match="interval_seconds"):
        checks.add_check("watchdog", lambda: None, interval_seconds=0)


def test_a_checks_run_and_error_counters_exist_at_zero_once_it_is_added(checks: CheckScheduler, registry) -> None:
    """So that the first error of a check shows in increase() and rate() (OpsdChecksFailing)."""
    checks.add_check("desk", lambda: None, 3600)

    assert registry.get_sample_value("opsd_check_errors_total", {"check": "desk"}) == 0
    assert registry.get_sample_value("opsd_check_runs_total", {"check": "desk"}) == 0
