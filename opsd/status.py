"""In-memory status of every known query: what ``/status`` shows and ``/readyz`` judges.

The recorder (listener thread), the runner (restarts), the scheduler (watchdog, tuning) and the HTTP
threads all touch it, so the store hands out immutable :class:`QueryStatus` snapshots and applies
changes under one lock.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field, replace
from typing import Any


@dataclass(frozen=True)
class QueryStatus:
    """One query as opsd sees it. Times are unix seconds from opsd's clock."""

    name: str
    id: str | None = None
    run_id: str | None = None
    active: bool = False
    started_at: float | None = None
    terminated_at: float | None = None
    last_batch_id: int | None = None
    # Last micro-batch progress; last_heartbeat_at also moves on idle events (alive, no data).
    last_progress_at: float | None = None
    last_heartbeat_at: float | None = None
    last_progress: Mapping[str, Any] | None = None
    backlog_rows: int | None = None
    exception: str | None = None
    exception_class: str | None = None
    restarts: int = 0
    crash_loop: bool = False
    stalled: bool = False
    trigger_interval_seconds: float | None = None
    max_rows_per_partition: int | None = None
    dyn_batch_size: int | None = None

    @property
    def failed(self) -> bool:
        """Terminated with an exception (and not restarted since)."""
        return not self.active and self.exception is not None


class StatusStore:
    """Thread-safe map of query name to :class:`QueryStatus`, plus the id-to-name index.

    Terminated events carry only the query id, so the store remembers which name each id had.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._queries: dict[str, QueryStatus] = {}
        self._names_by_id: dict[str, str] = {}

    def update(self, name: str, **changes: Any) -> QueryStatus:
        """Apply field changes to a query's status (creating it) and return the new snapshot."""
        with self._lock:
            current = self._queries.get(name) or QueryStatus(name=name)
            updated = replace(current, **changes)
            self._queries[name] = updated
            if updated.id is not None:
                self._names_by_id[updated.id] = name
            return updated

    def name_for(self, query_id: str) -> str:
        """The name a query id was last seen with; the id itself for queries never seen started."""
        with self._lock:
            return self._names_by_id.get(query_id, query_id)

    def get(self, name: str) -> QueryStatus | None:
        with self._lock:
            return self._queries.get(name)

    def snapshot(self) -> dict[str, QueryStatus]:
        """A consistent copy of all statuses (the values are immutable)."""
        with self._lock:
            return dict(self._queries)

    def forget(self, name: str) -> None:
        """Drop a query, e.g. one a user's script stopped for good, so it no longer affects readiness."""
        with self._lock:
            status = self._queries.pop(name, None)
            if status is not None and status.id is not None:
                self._names_by_id.pop(status.id, None)

    def to_json(self) -> dict[str, Any]:
        """The ``/status`` document."""
        return {"queries": {name: asdict(status) for name, status in sorted(self.snapshot().items())}}


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
    (``availableNow``, a user's ``stop()``). A failed query, one in a crash loop, one registered but
    not started yet, and a silent one do.
    """
    problems: list[NotReady] = []
    for status in statuses:
        problem = _readiness_problem(status, now, policy)
        if problem is not None:
            problems.append(problem)
    return Readiness(ready=not problems, not_ready=tuple(problems))


def _readiness_problem(status: QueryStatus, now: float, policy: ProgressPolicy) -> NotReady | None:
    if status.crash_loop:
        return NotReady(status.name, "crash_loop", status.exception_class or "")
    if status.failed:
        return NotReady(status.name, "failed", status.exception_class or "")
    if not status.active:
        if status.terminated_at is not None:
            return None
        return NotReady(status.name, "not_started")
    last_heard = status.last_heartbeat_at or status.started_at
    window = policy.window_seconds(status)
    if last_heard is None or now - last_heard > window:
        silent = "never" if last_heard is None else f"{now - last_heard:.1f}s"
        return NotReady(status.name, "no_progress", f"silent for {silent}, allowed {window:.1f}s")
    return None
