"""Collect positions: where each query stands on each of its queues, read once per cycle for every check.

A query's positions come from its checkpoint (the queries opsd runs, `watch:` entries) or, for a session opsd is
attached to, from the progress events of its running queries (their offsets carry the consumer path), where the last
batch with data gives the committed end (its `endOffset`) and the batch before it (its `startOffset`).

Read order: the checkpoint (or progress), then the consumer, then the queue's counters. A live queue's row count
only grows and the offsets only ever point at rows that existed when they were written, so offsets read first are
never past counters read after them — unless they are another queue's (`checkpoint_ahead_of_queue`,
`consumer_ahead_of_queue` in `opsd.checks.desync.evaluate`): a busy query never looks like a recreated queue. A
checkpoint's batches (or a running query's progress) and the consumer move together, so a query's positions are read
again when its newest batch moved while they were read (`consistent_positions`, `attached_positions`).

A checkpoint with nothing committed yet (a new checkpointLocation) is read as starting where the consumer stands,
within the queue's rows (the source's `initialOffset`): a new checkpoint behind the trim or at a consumer past the
queue's end is judged before its query fails. Whether the consumer is `vital` comes from the queue's retention (below).

Then, once per queue whatever the number of queries reading it, how the queue is trimmed (`QueueRetention`): its
`@auto_trim_config` and the offsets of its vital consumers, read after the counters, so a vital offset may be past
them by what was written and read in between (the trim forecast and the vital-consumer audit allow for it).

One query's failure (an unreadable checkpoint, a missing consumer) becomes that query's `problem` and never stops
the others; a queue whose retention cannot be read gets it as its retention's `problem`. `PositionsCollector.read`
shares one reading between the checks of a cycle (`max_age_seconds`).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import structlog

from opsd.config.models import OpsdConfig, unnamed_for_heal
from opsd.observe.progress import BatchProgress
from opsd.results.positions import (
    PartitionPositions,
    QueryPositions,
    QueuePositions,
    QueueRetention,
    VitalConsumer,
    same_consumer,
)
from streaming_core.auto_trim import AUTO_TRIM_ATTRIBUTE, AutoTrimConfig
from streaming_core.checkpoint import Checkpoint, newest_batch, read_checkpoint
from streaming_core.cluster import Cluster, ClusterError, NoSuchPathError, TabletInfo, connect
from streaming_core.cluster.schema import TIMESTAMP
from streaming_core.offsets import QueueOffset, removed_partitions
from streaming_core.options import CONSUMER_PATH

log = structlog.get_logger(__name__)

#: `QueuePositions.source` of positions read from progress events.
FROM_PROGRESS = "progress"
#: How often a target's positions are read in one reading when its query ran a batch meanwhile.
READ_ATTEMPTS = 2
#: `{query name: its recent progress events, oldest first}` of the queries running in the session.
ProgressSource = Callable[[], Mapping[str, Sequence[BatchProgress]]]


@dataclass(frozen=True)
class QueryTarget:
    """A query whose positions are read (and whose desync is healed where `heal`). `checkpoint` None: known from
    progress only; `queue` None: every yt source of the checkpoint; `consumer` None: the `consumer_path` the offsets
    carry (SPYT's offsets do not: name it), read as evidence only (never healed)."""

    query: str
    checkpoint: str | None = None
    queue: str | None = None
    consumer: str | None = None
    heal: bool = False

    @property
    def heals(self) -> bool:
        """Healed by the daemon: enabled, and the queue and the consumer named here (a heal never moves what a
        checkpoint's offsets name: they are evidence, never a target)."""
        return self.heal and not unnamed_for_heal(self)


@dataclass(frozen=True)
class Ends:
    """A queue's offsets in the newest batches: the committed end, the one before it, a planned end."""

    committed: QueueOffset | None
    before: QueueOffset | None = None
    planned: QueueOffset | None = None
    committed_batch: int | None = None
    planned_batch: int | None = None


def collect_checkpoint(cluster: Cluster, target: QueryTarget, checkpoint: Checkpoint,
                       schemas: dict[str, bool] | None = None) -> list[QueuePositions]:
    """Positions of each yt source of the checkpoint (or the target's queue), one `QueuePositions` per queue."""
    queues = [target.queue] if target.queue else [q.path for q in checkpoint.queues]
    if not queues:
        return [QueuePositions(target.query, "", target.consumer or "", checkpoint.location, checkpoint.committed_batch,
                           None, problem=f"checkpoint {checkpoint.location} has no yt source offsets yet")]
    found = []
    for queue in queues:
        planned = checkpoint.planned
        ends = Ends(
            committed=checkpoint.committed.queue(queue) if checkpoint.committed else None,
            before=checkpoint.before_committed.queue(queue) if checkpoint.before_committed else None,
            planned=planned.queue(queue) if planned else None,
            committed_batch=checkpoint.committed_batch,
            planned_batch=planned.batch_id if planned else None,
        )
        if checkpoint.committed is not None and ends.committed is None:
            read = ", ".join(q.path for q in checkpoint.committed.sources if q is not None) or "no yt queue"
            found.append(QueuePositions(target.query, queue, target.consumer or "", checkpoint.location,
                                        ends.committed_batch, ends.planned_batch,
                                        problem=f"{checkpoint.location}: batch {checkpoint.committed_batch} has no "
                                                f"offsets for {queue} (it reads {read})"))
            continue
        found.append(queue_positions(cluster, target.query, queue, target.consumer, checkpoint.location, ends,
                                     schemas))
    return found


def collect_progress(cluster: Cluster, query: str, progress: Sequence[BatchProgress], *,
                     stopped: bool = False, schemas: dict[str, bool] | None = None) -> list[QueuePositions]:
    """Positions of each yt source of a query from its recent progress (oldest first): the last batch with data."""
    found: dict[str, QueuePositions] = {}
    for event in reversed(progress):
        for source in event.sources:
            start, end = source.start_offset, source.end_offset
            if end is None or end.path in found or (start is not None and start.partitions == end.partitions):
                continue
            ends = Ends(end, start, committed_batch=event.batch_id)
            found[end.path] = queue_positions(cluster, query, end.path, None, FROM_PROGRESS, ends, schemas,
                                              stopped=stopped)
    return list(found.values())


def queue_positions(cluster: Cluster, query: str, queue: str, consumer: str | None, source: str, ends: Ends,
                    schemas: dict[str, bool] | None = None, *, stopped: bool = False) -> QueuePositions:
    """Read the consumer and the queue's counters and line them up with the checkpoint's ends; `schemas` remembers
    per queue whether it has `$timestamp` (a queue's schema is read once per collector, not every cycle)."""
    named = (ends.committed.consumer_path if ends.committed else None) \
        or (ends.planned.consumer_path if ends.planned else None)
    configured, consumer = consumer, consumer or named
    facts = QueuePositions(query, queue, consumer or "", source, ends.committed_batch, ends.planned_batch,
                           query_stopped=stopped)
    if configured and named and not same_consumer(named, configured):
        return _problem(facts, f"{source}: the offsets of {queue} name another consumer than the configured "
                               f"{configured}: another query's checkpoint? (nothing is healed)")
    if not consumer:
        return _problem(facts, f"{source}: the offsets of {queue} name no consumer_path (SPYT's do not): "
                               "give the consumer (watch: consumer, or --consumer)")
    offsets = ends.committed or ends.planned
    if offsets is not None and offsets.cluster != cluster.name:
        return _problem(facts, f"{source}: the offsets of {queue} are for cluster {offsets.cluster!r}, "
                               f"but {cluster.uri} is {cluster.name!r}")
    committed = cluster.get_consumer_offsets(consumer, queue)  # before the counters (module docstring)
    infos = cluster.get_tablet_infos(queue)
    removed = [] if ends.committed is None else removed_partitions(ends.committed.partitions, len(infos))
    if removed:
        return replace(_problem(facts, f"{source}: the checkpoint has read partitions {removed}, but {queue} now has "
                                       f"{len(infos)} tablets: they were removed by a reshard to fewer tablets, and "
                                       "the query stops with QueueReshardedError"), removed_partitions=tuple(removed))
    schemas = {} if schemas is None else schemas
    if queue not in schemas:
        schemas[queue] = TIMESTAMP in cluster.get_schema(queue).names
    return replace(facts, partitions=partitions(infos, ends, committed), timestamped=schemas[queue])


def partitions(infos: Sequence[TabletInfo], ends: Ends, committed: Mapping[int, int]
               ) -> tuple[PartitionPositions, ...]:
    """Each tablet's positions. The checkpoint's next row is where the query reads on: with nothing committed yet, where
    the consumer stands (the source's `initialOffset`), within the queue's rows; a tablet the committed checkpoint does
    not name (added since by a reshard) starts, as the source starts it, where the consumer stands."""
    def next_row(offset: QueueOffset | None, p: int) -> int | None:
        return None if offset is None or p not in offset.partitions else offset.partitions[p] + 1

    def position(t: TabletInfo) -> PartitionPositions:
        consumer = committed.get(t.tablet_index, 0)
        checkpoint = next_row(ends.committed, t.tablet_index)
        added = ends.committed is not None and checkpoint is None
        if checkpoint is None:
            checkpoint = consumer if added else min(consumer, t.total_row_count)
        return PartitionPositions(t.tablet_index, checkpoint, next_row(ends.before, t.tablet_index),
                                  next_row(ends.planned, t.tablet_index), consumer, t.total_row_count,
                                  t.trimmed_row_count, added=added)

    return tuple(position(t) for t in infos)


def _problem(facts: QueuePositions, problem: str) -> QueuePositions:
    return replace(facts, problem=problem)


def targets_for(config: OpsdConfig) -> list[QueryTarget]:
    """The config's queries with a known checkpoint: yt pipelines (healed when `checks.heal`) and `watch:` entries."""
    run = [QueryTarget(p.name, p.checkpoint_location, p.source.path, p.source.options.get(CONSUMER_PATH),
                       heal=config.checks.heal)
           for p in config.pipelines if p.source.format == "yt" and p.checkpoint_location]
    watched = [QueryTarget(w.name, w.checkpoint_location, w.queue, w.consumer, heal=w.heal) for w in config.watch]
    return run + watched


def collect_target(cluster: Cluster, target: QueryTarget, *, stopped: bool = False,
                   schemas: dict[str, bool] | None = None) -> list[QueuePositions]:
    """A target's positions; a failure to read them becomes the target's problem (never raised): a damaged or
    crafted checkpoint (`CheckpointError` names its file), a client's own error, anything, so that one watched query
    never stops the check of the others."""
    try:
        found = consistent_positions(cluster, target, schemas)
    except Exception as e:  # isolation: the problem is recorded and logged as this target's, with its class
        return [_failed(target.query, target.queue, target.consumer, target.checkpoint or "", e)]
    return [replace(f, query_stopped=stopped) for f in found]


def consistent_positions(cluster: Cluster, target: QueryTarget, schemas: dict[str, bool] | None = None
                         ) -> list[QueuePositions]:
    """A target's positions as of one moment. The running query plans and commits batches while they are read, and
    acknowledges the last batch on its consumer as it plans the next: a checkpoint read before such a batch with a
    consumer read after it would show a state neither moment had (`in_sync` or `consumer_ahead` for a query one
    batch behind). So the checkpoint's newest batch is listed again after the counters, and the positions read again
    (`READ_ATTEMPTS` in all) while it moved; still moving, each queue's positions say so as their `problem`."""
    for _ in range(READ_ATTEMPTS):
        checkpoint = read_checkpoint(target.checkpoint, cluster.uri)
        found = collect_checkpoint(cluster, target, checkpoint, schemas)
        if newest_batch(target.checkpoint, cluster.uri) == _newest_batch_of(checkpoint):
            return found
    return _still_moving(target.query, target.checkpoint or "", found)


def _newest_batch_of(checkpoint: Checkpoint) -> tuple[int | None, bool]:
    """The checkpoint's newest batch id and whether it is committed, as `newest_batch` lists them."""
    newest = checkpoint.newest.batch_id if checkpoint.newest else None
    return newest, newest is not None and newest == checkpoint.committed_batch


def _still_moving(query: str, source: str, found: list[QueuePositions]) -> list[QueuePositions]:
    """Positions read `READ_ATTEMPTS` times while the query's newest batch moved each time: unknown this cycle."""
    log.info("positions_moving", query=query, source=source, attempts=READ_ATTEMPTS)
    return [replace(f, partitions=(), problem=f"{source}: the query planned or committed a batch each time its "
                                              f"positions were read ({READ_ATTEMPTS} times): read again at the next "
                                              "cycle") for f in found]


def attached_positions(cluster: Cluster, progress: ProgressSource, known: Collection[str],
                       schemas: dict[str, bool] | None = None) -> dict[str, list[QueuePositions]]:
    """The positions of the running queries `known` does not name, from their progress. As with a checkpoint
    (`consistent_positions`), the last batch of a running query and its consumer move together: a query whose newest
    batch moved while its positions were read is read again with its new progress (`READ_ATTEMPTS` in all); still
    moving, its positions say so as their `problem`."""
    events = {q: e for q, e in progress().items() if q not in known}
    found = {q: _attached(cluster, q, e, schemas) for q, e in events.items()}
    for attempt in range(1, READ_ATTEMPTS + 1):
        now = progress()
        moved = [q for q in found if _last_batch(now.get(q, ())) != _last_batch(events[q])]
        for query in moved:
            if attempt == READ_ATTEMPTS:
                found[query] = _still_moving(query, FROM_PROGRESS, found[query])
            else:
                events[query] = now.get(query, ())
                found[query] = _attached(cluster, query, events[query], schemas)
        if not moved:
            break
    return found


def _last_batch(progress: Sequence[BatchProgress]) -> int | None:
    return progress[-1].batch_id if progress else None


def _attached(cluster: Cluster, query: str, events: Sequence[Mapping[str, Any]],
              schemas: dict[str, bool] | None) -> list[QueuePositions]:
    """An attached query's positions from its progress; a failure becomes its problem (never raised)."""
    try:
        return collect_progress(cluster, query, events, schemas=schemas)
    except (ValueError, KeyError, ClusterError) as e:
        return [_failed(query, None, None, FROM_PROGRESS, e)]


def _failed(query: str, queue: str | None, consumer: str | None, source: str, error: Exception) -> QueuePositions:
    problem = error_text(error)
    log.warning("desync_collect_failed", query=query, source=source, error=problem)
    return QueuePositions(query, queue or "", consumer or "", source, None, None, problem=problem)


def error_text(error: Exception) -> str:
    return f"{type(error).__name__}: {error}"


def collect_retention(cluster: Cluster, queue: str, automatic_trimming: bool | None = None) -> QueueRetention:
    """How `queue` is trimmed (`automatic_trimming`: whether the cluster trims at all, read once per reading); a
    failure to read it becomes its `problem` (never raised)."""
    try:
        try:
            config = AutoTrimConfig.from_yt(queue, cluster.get(f"{queue}/@{AUTO_TRIM_ATTRIBUTE}"))
        except NoSuchPathError:
            config = None
        vital = vital_consumers(cluster, queue)
    except Exception as e:  # isolation: this queue's retention is unknown, the rest of the reading stands
        log.warning("retention_collect_failed", queue=queue, error=error_text(e))
        return QueueRetention(queue, problem=error_text(e))
    return QueueRetention(queue, config, vital, automatic_trimming=automatic_trimming)


def vital_consumers(cluster: Cluster, queue: str) -> tuple[VitalConsumer, ...]:
    """The queue's vital consumers with their offsets. A job that goes away unregisters and removes its consumer: one
    removed since the registrations were listed, and no longer registered, is left out (as the next listing leaves
    it); one still registered without its consumer is an error (the retention's `problem`)."""
    found = []
    for registration in cluster.list_queue_consumer_registrations(queue_path=queue):
        if not registration.vital:
            continue
        try:
            offsets = cluster.get_consumer_offsets(registration.consumer_path, queue)
        except NoSuchPathError:
            if cluster.list_queue_consumer_registrations(queue, registration.consumer_path):
                raise
            continue
        found.append(VitalConsumer(registration.consumer_path, registration.partitions, offsets))
    return tuple(found)


@dataclass(frozen=True)
class Reading:
    """One cycle's read of the world: every query's positions (in the order found), the targets they were read
    for (a query found from progress has none) and, per queue read, how it is trimmed."""

    at: float
    queries: tuple[QueryPositions, ...] = ()
    targets: Mapping[str, QueryTarget] = field(default_factory=dict)
    retention: Mapping[str, QueueRetention] = field(default_factory=dict)

    def of(self, query: str) -> QueryPositions | None:
        return next((q for q in self.queries if q.query == query), None)

    @property
    def queues(self) -> tuple[QueuePositions, ...]:
        return tuple(queue for q in self.queries for queue in q.queues)


def collect(cluster: Cluster, targets: Sequence[QueryTarget], progress: ProgressSource | None, at: float,
            stopped: Callable[[str], bool] = lambda query: False, schemas: dict[str, bool] | None = None) -> Reading:
    """Positions of every target, then of every query in `progress` that no target names, then the retention of
    every queue whose partitions were read."""
    found = {t.query: collect_target(cluster, t, stopped=stopped(t.query), schemas=schemas) for t in targets}
    if progress is not None:
        found |= attached_positions(cluster, progress, found, schemas)
    read = dict.fromkeys(q.queue for positions in found.values() for q in positions if q.partitions)
    trimming = cluster.automatic_trimming() if read else None
    retention = {queue: collect_retention(cluster, queue, trimming) for queue in read}
    return Reading(at, tuple(QueryPositions(q, at, tuple(with_vital(p, retention) for p in queues))
                             for q, queues in found.items()),
                   {t.query: t for t in targets}, retention)


def with_vital(positions: QueuePositions, retention: Mapping[str, QueueRetention]) -> QueuePositions:
    """`positions` with whether its consumer is vital for its queue, from the queue's retention (read once per queue,
    whatever the number of queries reading it); None where the retention is unknown."""
    known = retention.get(positions.queue)
    if known is None or known.problem is not None:
        return positions
    return replace(positions, vital=any(same_consumer(v.consumer, positions.consumer) for v in known.vital))


class PositionsCollector:
    """Reads positions for the checks: `read()` reads every target's (and the running queries') positions now. The
    cycle (`opsd.checks.cycle`) reads once and hands that reading to each of its steps; a check run on its own (the
    runner's `before_start`, a test) reads anew. Thread-safe: reads run one at a time (the queues' schemas are
    remembered between them)."""

    def __init__(self, cluster_uri: str | None, targets: Iterable[QueryTarget] = (),
                 progress: ProgressSource | None = None, *, stopped: Callable[[str], bool] = lambda query: False,
                 clock: Callable[[], float] = time.time) -> None:
        self.cluster_uri = cluster_uri
        self.targets = list(targets)
        self.progress = progress
        self.stopped = stopped
        self.clock = clock
        self._schemas: dict[str, bool] = {}
        self._lock = threading.Lock()

    def read(self) -> Reading:
        with self._lock, connect(self.cluster_uri) as cluster:
            return collect(cluster, self.targets, self.progress, self.clock(), self.stopped, self._schemas)
