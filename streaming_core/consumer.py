"""Moving a consumer: every partition in one tablet transaction, compare-and-set, never past the queue's end.

The one way this project moves a consumer's offsets. `advance_consumer` never moves backwards: the source's `commit`
(acknowledging a batch) and opsd's desync heal call it, so both obey the same rules. `seek_consumer` moves either
way, for a person who decided where the consumer must stand (`opsd consumer seek`), but never below the queue's trim:
those rows are gone, and a consumer there fails its query's next batch (`TrimmedRowsError`). Offsets here are the
consumer's: the next row to read. A target past the queue's end (more rows than it has: the offset is another
queue's of that path, say one recreated under it) raises `BeyondQueueEndError` and nothing moves: the consumer would
skip every row written later below it.
"""

from __future__ import annotations

from collections.abc import Mapping

from .cluster import BeyondQueueEndError, Cluster, ConflictError, TabletInfo, TrimmedRowsError
from .cluster.base import wait_for_registration
from .log import get_logger

log = get_logger(__name__)

#: How often an advance is tried again when another writer moved the consumer between its read and its write.
ADVANCE_ATTEMPTS = 3


def advance_consumer(cluster: Cluster, consumer_path: str, queue_path: str, target: Mapping[int, int], *,
                     attempts: int = ADVANCE_ATTEMPTS) -> dict[int, tuple[int, int]]:
    """Move each partition's offset up to `target[partition]` (never down); returns the moves, `{p: (old, new)}`.

    Every move is a compare-and-set against the offset just read, all in one transaction: a consumer moved by
    someone else meanwhile raises `ConflictError`, and the whole advance is read and tried again, up to
    `attempts` times, after which the conflict is raised. A target past the queue's end: `BeyondQueueEndError`.
    """
    check_within_queue(cluster, consumer_path, queue_path, target)
    for attempt in range(1, attempts + 1):
        try:
            return _move(cluster, consumer_path, queue_path, target, backwards=False)
        except ConflictError:
            if attempt == attempts:
                raise
            log.warning("consumer_advance_conflict", consumer=consumer_path, queue=queue_path, attempt=attempt)
    return {}


def seek_consumer(cluster: Cluster, consumer_path: str, queue_path: str, target: Mapping[int, int], *,
                  dry_run: bool = False) -> dict[int, tuple[int, int]]:
    """Set each partition's offset to `target[partition]`, forwards or backwards, in one compare-and-set transaction
    (`ConflictError` when someone moved the consumer meanwhile: nothing moved); returns the moves (`dry_run`: the
    moves it would make, nothing written). A target below the partition's trim: `TrimmedRowsError`, nothing moved."""
    infos = check_within_queue(cluster, consumer_path, queue_path, target)
    for p, new in sorted(target.items()):
        if new < infos[p].trimmed_row_count:
            raise TrimmedRowsError(
                f"{queue_path}: partition {p}: consumer {consumer_path} not moved to offset {new}: rows below "
                f"{infos[p].trimmed_row_count} were trimmed (they are not there to read; the first row still there "
                f"is {infos[p].trimmed_row_count}: --to trim); nothing moved")
    if dry_run:
        return planned_moves(cluster.get_consumer_offsets(consumer_path, queue_path), target, backwards=True)
    moves = _move(cluster, consumer_path, queue_path, target, backwards=True)
    log.info("consumer_seeked", consumer=consumer_path, queue=queue_path,
             moves={str(p): list(m) for p, m in sorted(moves.items())})
    return moves


def check_within_queue(cluster: Cluster, consumer_path: str, queue_path: str,
                       target: Mapping[int, int]) -> dict[int, TabletInfo]:
    """`BeyondQueueEndError` unless every target names a partition of the queue and at most its row count; returns
    the queue's tablets as read, by partition."""
    infos = {t.tablet_index: t for t in cluster.get_tablet_infos(queue_path)}
    rows = {p: t.total_row_count for p, t in infos.items()}
    for p, new in sorted(target.items()):
        if p not in rows or new > rows[p]:
            there = f"{rows[p]} rows there" if p in rows else f"no partition {p} ({len(rows)} partitions)"
            raise BeyondQueueEndError(
                f"{queue_path}: partition {p}: consumer {consumer_path} not moved to offset {new}: the queue has "
                f"{there} (an offset past the end is another queue's of this path: was the queue recreated?); "
                f"nothing moved")
    return infos


def _move(cluster: Cluster, consumer_path: str, queue_path: str, target: Mapping[int, int], *,
          backwards: bool) -> dict[int, tuple[int, int]]:
    moves = planned_moves(cluster.get_consumer_offsets(consumer_path, queue_path), target, backwards=backwards)
    if moves:
        with cluster.transaction() as tx:
            for p, (old, new) in sorted(moves.items()):
                tx.advance_consumer(consumer_path, queue_path, p, old, new)
    return moves


def planned_moves(committed: Mapping[int, int], target: Mapping[int, int], *,
                  backwards: bool) -> dict[int, tuple[int, int]]:
    """The moves from the consumer's offsets to `target`, `{p: (old, new)}`: forward only unless `backwards`."""
    return {p: (committed.get(p, 0), new) for p, new in target.items()
            if new > committed.get(p, 0) or (backwards and new != committed.get(p, 0))}


def registration_seen(cluster: Cluster, queue_path: str, consumer_path: str) -> bool:
    """Whether the consumer's registration for the queue is seen, waiting out a fresh one: a YTsaurus proxy lists a
    registration only after its cache's refresh (`Cluster.registration_visible_within_seconds`), and says so here."""
    return wait_for_registration(
        lambda: bool(cluster.list_queue_consumer_registrations(queue_path, consumer_path)),
        cluster.registration_visible_within_seconds,
        lambda: log.info("waiting_for_consumer_registration", queue=queue_path, consumer=consumer_path,
                         at_most_seconds=cluster.registration_visible_within_seconds,
                         reason="a fresh registration is seen after the cluster's registration cache refresh"))
