"""What the producers check reads and what it finds (frozen, no I/O): a pipeline's producer target, its sessions as
the producer holds them, the facts collected once per run, what evaluate measured and the report the status keeps."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING

from streaming_core.producer_fences import Fence

if TYPE_CHECKING:
    from streaming_core.write_stats import WriteStats


@dataclass(frozen=True)
class ProducerTarget:
    """A pipeline whose `yt` sink writes through a queue producer: the cluster it writes, the producer, the queue, the
    sessions' common name (`<prefix>-p<partition>` / `<prefix>-t<tablet>`), how rows are numbered, and the tuning
    document beside which its sink keeps the write statistics and the fences (none: they are not recorded)."""

    query: str
    cluster: str
    producer: str
    queue: str
    prefix: str
    numbering: str
    tuning_path: str | None


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
class ProducerFacts:
    """One run's reading of a target: its sessions, the last batch's write statistics, the recorded fences, the
    query's last completed batch (opsd's status; None while unknown), what the previous run reported, and what kept
    the reading from being made (`problem`)."""

    target: ProducerTarget
    at: float
    sessions: tuple[Session, ...] = ()
    last_batch: WriteStats | None = None
    fences: tuple[Fence, ...] = ()
    query_batch_id: int | None = None
    previous: ProducerReport | None = None
    problem: str | None = None


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


@dataclass(frozen=True)
class ProducerEvaluation:
    """What a run measured: the report's facts (without a state), what it adds to the counters (`new`, the fences
first seen in `new_fences`) and the totals with it (`counted`)."""

    target: ProducerTarget
    at: float
    sessions: tuple[Session, ...]
    epoch_total: int
    last_batch: LastBatch | None
    fences: tuple[Fence, ...]
    sessions_ahead: tuple[str, ...]
    query_batch_id: int | None
    problem: str | None
    new: ProducerCounts = field(default_factory=ProducerCounts)
    new_fences: tuple[Fence, ...] = ()
    counted: ProducerCounts = field(default_factory=ProducerCounts)


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
        return {"producer": self.producer, "queue": self.queue, "numbering": self.numbering, "at": self.at,
                "state": self.state.value, "problem": self.problem, "sessions": self.sessions,
                "epoch_total": self.epoch_total, "last_batch": self.last_batch, "fenced_zombies": len(self.fences),
                "last_fence": self.last_fence, "sessions_ahead": self.sessions_ahead,
                "query_batch_id": self.query_batch_id,
                "counted": self.counted}
