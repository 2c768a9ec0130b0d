"""The check scheduler: the periodic checks (watchdog, tuning, desync, lag, OOM risk, the auto-tuner; built in
`opsd.checks.registry`) on APScheduler 3.x.

Each check runs as a zero-argument callable. A run is counted and timed; a failing run is logged
(``check_failed``) and counted, never raised, so one broken check cannot stop the others or the
watched queries. Runs of one check never overlap (``max_instances=1``) and missed runs collapse
into one (``coalesce=True``): a check that is late should run once, not catch up.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import structlog
from apscheduler.schedulers.background import BackgroundScheduler

from opsd.telemetry.metrics import Metrics

log = structlog.get_logger(__name__)

Check = Callable[[], object]


class CheckScheduler:
    """A ``BackgroundScheduler`` whose jobs are opsd checks."""

    def __init__(self, metrics: Metrics, scheduler: BackgroundScheduler | None = None) -> None:
        self.metrics = metrics
        self.scheduler = scheduler or BackgroundScheduler(daemon=True, timezone="UTC")

    def add_check(self, name: str, func: Check, interval_seconds: float) -> None:
        """Run ``func`` every ``interval_seconds``; replaces an existing check of the same name."""
        if interval_seconds <= 0:
            raise ValueError(f"check {name!r}: interval_seconds must be > 0, got {interval_seconds}")
        # replace_existing does not apply to jobs added before start(); remove explicitly.
        for counter in (self.metrics.check_runs, self.metrics.check_errors):
            counter.labels(check=name)  # exists at 0 from the start, so increase() sees its first error
        if self.scheduler.get_job(name) is not None:
            self.scheduler.remove_job(name)
        self.scheduler.add_job(
            self.run_check,
            trigger="interval",
            seconds=interval_seconds,
            args=(name, func),
            id=name,
            name=name,
            max_instances=1,
            coalesce=True,
        )

    def run_check(self, name: str, func: Check) -> bool:
        """One counted, timed run; True when it succeeded. Never raises."""
        self.metrics.check_runs.labels(check=name).inc()
        started = time.perf_counter()
        try:
            func()
        except Exception:
            self.metrics.check_errors.labels(check=name).inc()
            log.exception("check_failed", check=name)
            return False
        finally:
            self.metrics.check_duration_seconds.labels(check=name).observe(time.perf_counter() - started)
        return True

    def start(self) -> None:
        if not self.scheduler.running:
            self.scheduler.start()

    def shutdown(self, wait: bool = True) -> None:
        """Stop scheduling; with ``wait`` the running checks finish first."""
        if self.scheduler.running:
            self.scheduler.shutdown(wait=wait)
