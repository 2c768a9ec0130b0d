"""A query's queue producer as opsd sees it (`opsd.checks.producers`): its sessions, the counters, the last batch's
statistics, the fences of zombie attempts and the state; `QueryStatus.producers` keeps the report."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from opsd.results.values import parsed_fields
from streaming_core.producer_fences import Fence

#: What `ProducerReport.to_json` adds for readers that `from_json` leaves (they follow from `fences`).
_DERIVED = ("fenced_zombies", "last_fence")


@dataclass(frozen=True)
class Session:
    """One session of the query: its epoch (how often a task opened it), the last number written (-1: none) and, in
    batch numbering, the batch and row it stands for; the task that pushed last (its `user_meta`)."""

    session: str
    epoch: int
    sequence_number: int
    batch_id: int | None = None
    partition: int | None = None
    attempt: int | None = None


@dataclass(frozen=True)
class ProducerCounts:
    """Epochs bumped, rows skipped as written before, zombie attempts fenced off: what a run adds to the counters, or
    their totals."""

    epoch_bumps: int = 0
    skipped_rows: int = 0
    fenced_zombies: int = 0

    def plus(self, other: ProducerCounts) -> ProducerCounts:
        return ProducerCounts(self.epoch_bumps + other.epoch_bumps, self.skipped_rows + other.skipped_rows,
                              self.fenced_zombies + other.fenced_zombies)


@dataclass(frozen=True)
class LastBatch:
    """The last batch's producer statistics (its tasks' sums, stored by its commit or abort)."""

    batch_id: int | None
    sessions: int
    epoch_bumps: int
    skipped_rows: int
    at: float | None


class ProducerState(StrEnum):
    """How a query's producer stands, the most urgent first."""

    PROBLEM = "problem"  # the producer could not be read (missing, no permission, the cluster unreachable)
    SESSIONS_AHEAD = "sessions_ahead"  # sessions hold later batches than the query: its new rows are skipped
    ZOMBIE_FENCED = "zombie_fenced"  # an attempt was fenced off lately (no row was duplicated)
    OK = "ok"

    @property
    def needs_action(self) -> bool:
        """Whether a person must act (rows are being skipped, or the producer cannot be read)."""
        return self in (ProducerState.PROBLEM, ProducerState.SESSIONS_AHEAD)


@dataclass(frozen=True)
class ProducerReport:
    """A query's producer as opsd sees it (`QueryStatus.producers`): its sessions, the sum of their epochs, the last
    batch's statistics, the recorded fences and the latest, the sessions ahead of the query, the totals opsd counted
    since it started (`counted`: the metrics' values) and the state."""

    query: str
    producer: str
    queue: str
    numbering: str
    at: float
    state: ProducerState
    sessions: tuple[Session, ...] = ()
    epoch_total: int = 0
    last_batch: LastBatch | None = None
    fences: tuple[Fence, ...] = ()
    sessions_ahead: tuple[str, ...] = ()
    query_batch_id: int | None = None
    counted: ProducerCounts = field(default_factory=ProducerCounts)
    problem: str | None = None

    @property
    def last_fence(self) -> Fence | None:
        return self.fences[-1] if self.fences else None

    def to_json(self) -> dict[str, object]:
        return {"query": self.query, "producer": self.producer, "queue": self.queue, "numbering": self.numbering,
                "at": self.at, "state": self.state.value, "problem": self.problem, "sessions": self.sessions,
                "epoch_total": self.epoch_total, "last_batch": self.last_batch, "fences": self.fences,
                "fenced_zombies": len(self.fences), "last_fence": self.last_fence,
                "sessions_ahead": self.sessions_ahead, "query_batch_id": self.query_batch_id, "counted": self.counted}

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> ProducerReport:
        """The report `to_json` wrote (a daemon's `/status`)."""
        return parsed_fields(cls, {k: v for k, v in doc.items() if k not in _DERIVED})
