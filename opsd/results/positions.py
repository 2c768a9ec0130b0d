"""Where each query stands, read once per cycle: per query and queue the checkpoint's batches, the consumer and the
queue's counters, in next-row terms (a checkpoint's last-read index + 1, as a consumer offset is).

Plain frozen data, read by `opsd.collect.positions` and evaluated by every check that needs them (desync,
lag, OOM risk, the auto-tuner, the trim forecast, the vital-consumer audit); the status store keeps them inside the
desync check's results. Per queue (not per query) the cycle also reads how the queue is trimmed: its
`@auto_trim_config` and the offsets of the consumers registered as vital for it (`QueueRetention`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from streaming_core.auto_trim import AutoTrimConfig, vital_for
from streaming_core.offsets import unread_rows


@dataclass(frozen=True)
class PartitionPositions:
    """One partition. `previous_next` is the end of the batch before the committed one (None when unknown),
    `planned_next` the end of a planned batch not committed yet (None when there is none). `added`: the committed
    checkpoint does not name the partition (the queue gained it since, by a reshard): the query starts it where the
    consumer stands, so `checkpoint_next` is the consumer's offset."""

    partition: int
    checkpoint_next: int
    previous_next: int | None
    planned_next: int | None
    consumer_offset: int
    row_count: int
    trimmed_row_count: int
    added: bool = False

    @property
    def next_row(self) -> int:
        """The next row the query reads: the committed checkpoint's end, or the consumer's offset when that is
        further (the source's own rule)."""
        return max(self.checkpoint_next, self.consumer_offset)

    @property
    def unread_rows(self) -> int:
        return unread_rows(self.next_row, self.row_count, self.trimmed_row_count)


@dataclass(frozen=True)
class QueuePositions:
    """One queue of one query, where its positions came from (`checkpoint` location or `progress`), and any problem
    that makes its partitions unknowable (`problem`, with `partitions` empty). `timestamped`: the queue has the
    `$timestamp` column. `vital`: the consumer is registered vital for the queue (a trim waits for it); None when
    it is not registered or was not read. `removed_partitions`: partitions the checkpoint has read that the queue no
    longer has (its tablets were removed by a reshard; the problem says so)."""

    query: str
    queue: str
    consumer: str
    source: str
    committed_batch: int | None
    planned_batch: int | None
    partitions: tuple[PartitionPositions, ...] = ()
    query_stopped: bool = False
    problem: str | None = None
    timestamped: bool = False
    removed_partitions: tuple[int, ...] = ()
    vital: bool | None = None


@dataclass(frozen=True)
class QueryPositions:
    """One query's queues, read at `at` (unix seconds)."""

    query: str
    at: float
    queues: tuple[QueuePositions, ...] = ()

    @property
    def backlog_rows(self) -> int | None:
        """Rows written and not read yet over every queue; None when no queue's partitions are known."""
        known = [p for q in self.queues for p in q.partitions]
        return sum(p.unread_rows for p in known) if known else None

    def trimmed(self) -> dict[str, dict[int, int]]:
        """Per queue, each partition's trimmed row count."""
        return {q.queue: {p.partition: p.trimmed_row_count for p in q.partitions} for q in self.queues if q.partitions}


def consumer_key(path: str) -> str:
    """A consumer's path as compared between queries, checkpoints and registrations (`//a/c/` is `//a/c`)."""
    return path.rstrip("/")


def same_consumer(a: str | None, b: str | None) -> bool:
    """Whether two paths name one consumer (the one rule: a query's own consumer, a vital one, a checkpoint's); an
    empty or missing path names none."""
    return bool(a) and bool(b) and consumer_key(a or "") == consumer_key(b or "")


@dataclass(frozen=True)
class VitalConsumer:
    """A consumer registered as vital for a queue (for `partitions`, None: all) and its offsets (next row to read;
    a partition never advanced is absent: 0)."""

    consumer: str
    partitions: tuple[int, ...] | None
    offsets: Mapping[int, int] = field(default_factory=dict)

    def offset(self, partition: int) -> int | None:
        """Its offset in `partition`, None when it is not vital for that partition."""
        return self.offsets.get(partition, 0) if vital_for(self.partitions, partition) else None


@dataclass(frozen=True)
class QueueRetention:
    """How a queue is trimmed, read once per cycle after the queries' positions: its `@auto_trim_config` (None: not
    set) and its vital consumers with their offsets (which may be past the counters read before them: see
    `opsd.collect.positions`); `problem` when they could not be read."""

    queue: str
    auto_trim: AutoTrimConfig | None = None
    vital: tuple[VitalConsumer, ...] = ()
    problem: str | None = None
    #: Whether the cluster's trimming runs at all (`Cluster.automatic_trimming`; None: unknown).
    automatic_trimming: bool | None = None

    def vital_offsets(self, partition: int) -> dict[str, int]:
        """`{consumer: offset}` of the consumers vital for `partition`."""
        return {v.consumer: o for v in self.vital if (o := v.offset(partition)) is not None}
