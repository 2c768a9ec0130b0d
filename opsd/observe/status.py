"""The status store: in-memory status of every known query, what `/status` shows and `/readyz` judges.

The recorder (listener thread, the runner's restarts, the scheduled checks) is its only writer; the checks, the HTTP
threads and the demo read it, so the store hands out immutable :class:`QueryStatus` snapshots and applies changes
under one lock. A status holds the checks' results as their frozen types (`opsd.results`); JSON is made only
where it leaves the process, by `jsonable` (`StatusStore.to_json` for `/status`, the doctor's `--json`).
"""

from __future__ import annotations

import dataclasses
import math
import threading
import typing
from collections.abc import Mapping
from dataclasses import dataclass, replace
from enum import Enum
from typing import Any

from opsd.observe.phases import PhaseShares
from opsd.observe.progress import BatchSummary, PartitionOffsets
from opsd.results.autotune import Knob, TunerDecision
from opsd.results.cycle import CycleTrace
from opsd.results.desync import DesyncEntry
from opsd.results.lag import QueryLag
from opsd.results.oom import OomVerdict
from opsd.results.producers import ProducerReport
from opsd.results.queue_agent import QueueSignals
from opsd.results.trim import QueueTrim
from opsd.results.values import INFINITIES, frozen_mapping, parsed
from opsd.results.vital import VitalConsumerAudit

#: Batches of a query kept in `QueryStatus.recent_batches`.
RECENT_BATCHES = 32


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
    last_progress: BatchSummary | None = None
    # The last RECENT_BATCHES batches, oldest first (the auto-tuner's batch-duration-versus-size history).
    recent_batches: tuple[BatchSummary, ...] = ()
    backlog_rows: int | None = None
    # Per yt partition, where the last batch ended and the latest offset it saw: the next batch's plan.
    partitions: tuple[PartitionOffsets, ...] = ()
    exception: str | None = None
    exception_class: str | None = None
    # One line that says what failed: the product's own message when Spark's text holds one.
    error: str | None = None
    # Why opsd stopped the query for good (a failure that a restart cannot fix), None while it may run.
    permanent_failure: str | None = None
    restarts: int = 0
    crash_loop: bool = False
    stalled: bool = False
    trigger_interval_seconds: float | None = None
    max_rows_per_partition: int | None = None
    max_bytes_per_partition: int | None = None
    dyn_batch_size: int | None = None
    # Per queue: the desync check's result and the last heal; the lag check's result (backlog, lag, drain).
    desync: Mapping[str, DesyncEntry] | None = None
    lag: QueryLag | None = None
    # Per queue: the Queue Agent's signals (write rates, the consumer's disposition, unread rows, processing lag).
    queue_agent: Mapping[str, QueueSignals] | None = None
    # Per knob: the auto-tuner's latest decision (current, recommended, direction, reason, mode, bounds).
    autotune: Mapping[str, TunerDecision] | None = None
    # The OOM check's verdict per pool: expected peak, its interval at the confidence, probability over the limit.
    oom: OomVerdict | None = None
    # Per queue: the trim forecast (time until its trimming deletes rows not read yet); the vital consumers of the
    # queues it reads (its own or other jobs'), with how long each has stood still while rows wait.
    trim: Mapping[str, QueueTrim] | None = None
    vital_consumers: tuple[VitalConsumerAudit, ...] | None = None
    # Where the recent measured batches spent their time, per phase (the phases check).
    phases: PhaseShares | None = None
    # The queue producer its yt sink writes through (producer mode): sessions, epoch bumps, skipped rows, fences.
    producers: ProducerReport | None = None

    def __post_init__(self) -> None:
        for name in ("desync", "queue_agent", "autotune", "trim"):
            if (value := getattr(self, name)) is not None:
                object.__setattr__(self, name, frozen_mapping(value))

    @property
    def progress_since(self) -> float | None:
        """This run's last batch progress, or its start when that is later: a restarted query is judged from its
        new start, not by the previous run's last batch."""
        return _latest(self.last_progress_at, self.started_at)

    @property
    def heard_since(self) -> float | None:
        """This run's last progress or idle event, or its start when that is later."""
        return _latest(self.last_heartbeat_at, self.started_at)

    @property
    def failed(self) -> bool:
        """Terminated with an exception (and not restarted since)."""
        return not self.active and self.exception is not None

    @property
    def state(self) -> str:
        """The query's state in a word or two (`state_word`)."""
        return state_word(active=self.active, crash_loop=self.crash_loop, stalled=self.stalled,
                          failed=bool(self.exception_class or self.exception), started=self.started_at is not None)


def _latest(*times: float | None) -> float | None:
    known = [t for t in times if t is not None]
    return max(known) if known else None


class StatusStore:
    """Thread-safe map of query name to :class:`QueryStatus`, plus the id-to-name index.

    Terminated events carry only the query id, so the store remembers which name each id had.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._queries: dict[str, QueryStatus] = {}
        self._names_by_id: dict[str, str] = {}
        self._cycle: CycleTrace | None = None

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

    def knows_id(self, query_id: str) -> bool:
        """Whether a query with this id was seen started (or running at attach)."""
        with self._lock:
            return query_id in self._names_by_id

    def get(self, name: str) -> QueryStatus | None:
        with self._lock:
            return self._queries.get(name)

    def snapshot(self) -> dict[str, QueryStatus]:
        """A consistent copy of all statuses (the values are immutable)."""
        with self._lock:
            return dict(self._queries)

    def set_cycle(self, trace: CycleTrace) -> None:
        """The last cycle of the position checks (what `/status` shows as `cycle`)."""
        with self._lock:
            self._cycle = trace

    @property
    def cycle(self) -> CycleTrace | None:
        with self._lock:
            return self._cycle

    def to_json(self) -> dict[str, Any]:
        """The ``/status`` document: every query, and the last cycle's trace (None before the first)."""
        return {"queries": {name: jsonable(status) for name, status in sorted(self.snapshot().items())},
                "cycle": jsonable(self.cycle)}


def jsonable(value: Any) -> Any:
    """The one serializer of what leaves the process as JSON (`/status`, `opsd doctor --json`): a typed result by
    its `to_json` shape, another dataclass by its fields, an enum by its value, mapping keys as strings, tuples as
    lists, and an infinite float as the string `"+Inf"` (`"-Inf"`), which JSON cannot carry."""
    if hasattr(value, "to_json") and not isinstance(value, type):
        return jsonable(value.to_json())
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, Mapping):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (tuple, list)):
        return [jsonable(v) for v in value]
    if isinstance(value, float) and math.isinf(value):
        return next(text for text, inf in INFINITIES.items() if inf == value)
    return value


def status_of(name: str, doc: Mapping[str, Any]) -> QueryStatus:
    """A query of a daemon's `/status` document read back into the types it was written from (the inverse of
    `jsonable` on a `QueryStatus`): the one parser of what comes in as `/status`. Entries under a queue or a knob get
    it from their key; a field this version does not know is left out; `ValueError` or `TypeError` when a known
    field is not what this version writes."""
    per_queue = {"desync": DesyncEntry, "queue_agent": QueueSignals, "trim": QueueTrim}
    hints = typing.get_type_hints(QueryStatus)
    found: dict[str, Any] = {}
    for f in dataclasses.fields(QueryStatus):
        value = doc.get(f.name)
        if f.name == "name" or value is None:
            continue
        if f.name in per_queue:
            found[f.name] = {q: per_queue[f.name].from_json(entry, name, q) for q, entry in value.items()}
        elif f.name == "autotune":
            found[f.name] = {Knob(k): TunerDecision.from_json(entry, name, Knob(k)) for k, entry in value.items()}
        elif f.name == "lag":
            found[f.name] = QueryLag.from_json(value, name)
        else:
            found[f.name] = parsed(hints[f.name], value)
    return QueryStatus(name, **found)


def state_word(*, active: bool, crash_loop: bool, stalled: bool, failed: bool, started: bool) -> str:
    """A query's state in a word or two, the most urgent first (what `opsd status` and the demo show)."""
    if active:
        return "crash loop" if crash_loop else "stalled" if stalled else "running"
    if failed:
        return "failed"
    return "stopped" if started else "not started"
