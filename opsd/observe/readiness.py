"""Readiness: whether every known query is alive and heard from within its progress window (`/readyz`).

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
    """Why one query keeps opsd from being ready."""

    query: str
    reason: str
    detail: str = ""


@dataclass(frozen=True)
class Readiness:
    ready: bool
    not_ready: tuple[NotReady, ...] = field(default=())

    def to_json(self) -> dict[str, Any]:
        return {"ready": self.ready, "not_ready": [asdict(item) for item in self.not_ready]}


def evaluate_readiness(statuses: Iterable[QueryStatus], now: float, policy: ProgressPolicy) -> Readiness:
    """Ready when every known query is active and heard from (progress or idle) within its window.

    A query that stopped cleanly (no exception) does not block readiness: it finished on purpose
    (``availableNow``, a user's ``stop()``). A query stopped for good on a failure, a failed query, one in a
    crash loop, one registered but not started yet, and a silent one do.
    """
    problems: list[NotReady] = []
    for status in statuses:
        problem = _readiness_problem(status, now, policy)
        if problem is not None:
            problems.append(problem)
    return Readiness(ready=not problems, not_ready=tuple(problems))


def _readiness_problem(status: QueryStatus, now: float, policy: ProgressPolicy) -> NotReady | None:
    if status.permanent_failure:
        return NotReady(status.name, "failed_permanently", status.permanent_failure)
    if status.crash_loop:
        return NotReady(status.name, "crash_loop", status.exception_class or "")
    if status.failed:
        return NotReady(status.name, "failed", status.exception_class or "")
    if not status.active:
        if status.terminated_at is not None:
            return None
        return NotReady(status.name, "not_started")
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
