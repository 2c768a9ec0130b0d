"""Readiness: whether opsd has brought up every known query, and which queries are in trouble (`/readyz`).

A failing pipeline must stay visible: `/readyz` failing takes the pod out of its Service's endpoints, and with it
the metrics and alerts that say which pipeline fails. So only a query that was never brought up (opsd is still
starting) makes the daemon not ready; a failed, crash-looping, silent or permanently failed query is *degraded*:
listed in the document beside the verdict, and reported by its own metric and alert (`opsd_query_up`,
`opsd_query_crash_loop`, `opsd_query_stalled`, `opsd_query_failed_permanently`).

`evaluate_readiness` is pure (status snapshots, the time, a `ProgressPolicy`); `readiness_probe` binds it to the
store and the clock for the HTTP endpoint.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from typing import Any

from opsd.observe.status import QueryStatus, StatusStore


@dataclass(frozen=True)
class ProgressPolicy:
    """How long a query may go without progress: ``max(stall_factor x trigger, min_window_seconds)``.

    The minimum covers queries with a zero or unknown trigger interval, and Spark posting idle
    events only every ``spark.sql.streaming.noDataProgressEventInterval`` (10 s by default).
    """

    stall_factor: float = 3.0
    min_window_seconds: float = 60.0

    def window_seconds(self, status: QueryStatus) -> float:
        interval = status.trigger_interval_seconds or 0.0
        return max(self.stall_factor * interval, self.min_window_seconds)


@dataclass(frozen=True)
class NotReady:
    """Why one query keeps opsd from being ready (``not_started``) or is degraded (every other reason)."""

    query: str
    reason: str
    detail: str = ""


#: The one reason that makes the daemon not ready: a query opsd has not brought up yet.
NOT_STARTED = "not_started"


@dataclass(frozen=True)
class Readiness:
    ready: bool
    not_ready: tuple[NotReady, ...] = field(default=())
    degraded: tuple[NotReady, ...] = field(default=())

    def to_json(self) -> dict[str, Any]:
        return {"ready": self.ready, "not_ready": [asdict(item) for item in self.not_ready],
                "degraded": [asdict(item) for item in self.degraded]}


def evaluate_readiness(statuses: Iterable[QueryStatus], now: float, policy: ProgressPolicy) -> Readiness:
    """Ready when every known query has been brought up; the queries in trouble are listed as degraded.

    Degraded: a query stopped for good on a failure, a failed one, one in a crash loop, and one active but not
    heard from (progress or idle) within its window. A query that stopped cleanly (no exception) is neither: it
    finished on purpose (``availableNow``, a user's ``stop()``).
    """
    problems = [problem for status in statuses if (problem := _query_problem(status, now, policy)) is not None]
    not_ready = tuple(problem for problem in problems if problem.reason == NOT_STARTED)
    degraded = tuple(problem for problem in problems if problem.reason != NOT_STARTED)
    return Readiness(ready=not not_ready, not_ready=not_ready, degraded=degraded)


def _query_problem(status: QueryStatus, now: float, policy: ProgressPolicy) -> NotReady | None:
    if status.permanent_failure:
        return NotReady(status.name, "failed_permanently", status.permanent_failure)
    if status.crash_loop:
        return NotReady(status.name, "crash_loop", status.exception_class or "")
    if status.failed:
        return NotReady(status.name, "failed", status.exception_class or "")
    if not status.active:
        if status.terminated_at is not None:
            return None
        return NotReady(status.name, NOT_STARTED)
    last_heard = status.heard_since
    window = policy.window_seconds(status)
    if last_heard is None or now - last_heard > window:
        silent = "never" if last_heard is None else f"{now - last_heard:.1f}s"
        return NotReady(status.name, "no_progress", f"silent for {silent}, allowed {window:.1f}s")
    return None


def readiness_probe(store: StatusStore, policy: ProgressPolicy, clock: Callable[[], float]) -> Callable[[], tuple]:
    """What `/readyz` serves: `(ready, document)` for the store's queries at `clock()`."""

    def probe() -> tuple[bool, dict[str, Any]]:
        readiness = evaluate_readiness(store.snapshot().values(), clock(), policy)
        return readiness.ready, readiness.to_json()

    return probe
