"""Collect desync facts: a query's checkpoint (or, for a query opsd is only attached to, its progress events), its
consumer and its queue's counters, read from the cluster.

Two ways in, one shape out (`QueueFacts`): `collect_checkpoint` for queries whose checkpoint location is known
(pipelines opsd runs, `watch:` entries, `opsd desync` / `opsd doctor`), reading only the newest `offsets/N` and
`commits/N`; `collect_progress` for queries seen through a listener, where the last batch with data gives the
committed end (its `endOffset`) and the batch before it (its `startOffset`).

Read order: the checkpoint (or progress), then the consumer, then the queue's counters. A live queue's row count
only grows and the offsets only ever point at rows that existed when they were written, so offsets read first are
never past counters read after them — unless they are another queue's (`checkpoint_ahead_of_queue`,
`consumer_ahead_of_queue` in `opsd.checks.desync.evaluate`): a busy query never looks like a recreated queue.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from opsd.checks.desync.facts import PartitionFacts, QueueFacts
from streaming_core.checkpoint import Checkpoint
from streaming_core.cluster import Cluster, TabletInfo
from streaming_core.offsets import QueueOffset

#: `QueueFacts.source` of facts read from progress events.
FROM_PROGRESS = "progress"


@dataclass(frozen=True)
class DesyncTarget:
    """A query to check. `checkpoint` None: known from progress only; `queue` None: every yt source of the
    checkpoint; `consumer` None: the `consumer_path` the offsets carry (SPYT's offsets do not: name it)."""

    query: str
    checkpoint: str | None = None
    queue: str | None = None
    consumer: str | None = None
    heal: bool = False


@dataclass(frozen=True)
class Ends:
    """A queue's offsets in the newest batches: the committed end, the one before it, a planned end."""

    committed: QueueOffset | None
    before: QueueOffset | None = None
    planned: QueueOffset | None = None
    committed_batch: int | None = None
    planned_batch: int | None = None


def collect_checkpoint(cluster: Cluster, target: DesyncTarget, checkpoint: Checkpoint) -> list[QueueFacts]:
    """Facts for each yt source of the checkpoint (or the target's queue), one `QueueFacts` per queue."""
    queues = [target.queue] if target.queue else [q.path for q in checkpoint.queues]
    if not queues:
        return [QueueFacts(target.query, "", target.consumer or "", checkpoint.location, checkpoint.committed_batch,
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
        facts = queue_facts(cluster, target.query, queue, target.consumer, checkpoint.location, ends)
        if checkpoint.committed is not None and ends.committed is None:
            read = ", ".join(q.path for q in checkpoint.committed.sources if q is not None) or "no yt queue"
            facts = _problem(facts, f"{checkpoint.location}: batch {checkpoint.committed_batch} has no offsets for "
                                    f"{queue} (it reads {read})")
        found.append(facts)
    return found


def collect_progress(cluster: Cluster, query: str, progress: Sequence[Mapping[str, Any]], *,
                     stopped: bool = False) -> list[QueueFacts]:
    """Facts for each yt source of a query from its recent progress (oldest first): the last batch with data."""
    found: dict[str, QueueFacts] = {}
    for event in reversed(progress):
        for source in event.get("sources") or ():
            start = QueueOffset.from_progress(source.get("startOffset"))
            end = QueueOffset.from_progress(source.get("endOffset"))
            if end is None or end.path in found or (start is not None and start.partitions == end.partitions):
                continue
            ends = Ends(end, start, committed_batch=int(event["batchId"]))
            found[end.path] = queue_facts(cluster, query, end.path, None, FROM_PROGRESS, ends, stopped=stopped)
    return list(found.values())


def queue_facts(cluster: Cluster, query: str, queue: str, consumer: str | None, source: str, ends: Ends, *,
                stopped: bool = False) -> QueueFacts:
    """Read the consumer and the queue's counters and line them up with the checkpoint's ends."""
    consumer = consumer or (ends.committed.consumer_path if ends.committed else None) \
        or (ends.planned.consumer_path if ends.planned else None)
    facts = QueueFacts(query, queue, consumer or "", source, ends.committed_batch, ends.planned_batch,
                       query_stopped=stopped)
    if not consumer:
        return _problem(facts, f"{source}: the offsets of {queue} name no consumer_path (SPYT's do not): "
                               "give the consumer (watch: consumer, or --consumer)")
    if ends.committed is None:
        return facts
    if ends.committed.cluster != cluster.name:
        return _problem(facts, f"{source}: the offsets of {queue} are for cluster {ends.committed.cluster!r}, "
                               f"but {cluster.uri} is {cluster.name!r}")
    committed = cluster.get_consumer_offsets(consumer, queue)  # before the counters (module docstring)
    infos = cluster.get_tablet_infos(queue)
    if sorted(ends.committed.partitions) != [t.tablet_index for t in infos]:
        return _problem(facts, f"{source}: the checkpoint has partitions {sorted(ends.committed.partitions)} but "
                               f"{queue} has {len(infos)} tablets")
    return replace(facts, partitions=partitions(infos, ends, committed))


def partitions(infos: Sequence[TabletInfo], ends: Ends, committed: Mapping[int, int]) -> tuple[PartitionFacts, ...]:
    def next_row(offset: QueueOffset | None, p: int) -> int | None:
        return None if offset is None or p not in offset.partitions else offset.partitions[p] + 1

    return tuple(
        PartitionFacts(t.tablet_index, next_row(ends.committed, t.tablet_index) or 0,
                       next_row(ends.before, t.tablet_index), next_row(ends.planned, t.tablet_index),
                       committed.get(t.tablet_index, 0), t.total_row_count, t.trimmed_row_count)
        for t in infos)


def _problem(facts: QueueFacts, problem: str) -> QueueFacts:
    return replace(facts, problem=problem)
