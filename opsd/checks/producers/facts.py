"""What the producers check reads and measures (frozen, no I/O): a pipeline's producer target, the facts collected once
per run and what evaluate measured; the report the status keeps is `opsd.results.producers`."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from opsd.results.producers import LastBatch, ProducerCounts, ProducerReport, Session
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
