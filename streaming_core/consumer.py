"""Advancing a consumer: every partition in one tablet transaction, compare-and-set, never backwards.

The one way this project moves a consumer's offsets: the source's `commit` (acknowledging a batch) and opsd's
desync heal call it, so both obey the same rules. Offsets here are the consumer's: the next row to read.
"""

from __future__ import annotations

from collections.abc import Mapping

from .cluster import Cluster, ConflictError
from .log import get_logger

log = get_logger(__name__)

#: How often an advance is tried again when another writer moved the consumer between its read and its write.
ADVANCE_ATTEMPTS = 3


def advance_consumer(cluster: Cluster, consumer_path: str, queue_path: str, target: Mapping[int, int], *,
                     attempts: int = ADVANCE_ATTEMPTS) -> dict[int, tuple[int, int]]:
    """Move each partition's offset up to `target[partition]` (never down); returns the moves, `{p: (old, new)}`.

    Every move is a compare-and-set against the offset just read, all in one transaction: a consumer moved by
    someone else meanwhile raises `ConflictError`, and the whole advance is read and tried again, up to
    `attempts` times, after which the conflict is raised.
    """
    for attempt in range(1, attempts + 1):
        try:
            return _advance_once(cluster, consumer_path, queue_path, target)
        except ConflictError:
            if attempt == attempts:
                raise
            log.warning("consumer_advance_conflict", consumer=consumer_path, queue=queue_path, attempt=attempt)
    return {}


def _advance_once(cluster: Cluster, consumer_path: str, queue_path: str,
                  target: Mapping[int, int]) -> dict[int, tuple[int, int]]:
    committed = cluster.get_consumer_offsets(consumer_path, queue_path)
    moves = {p: (committed.get(p, 0), new) for p, new in target.items() if new > committed.get(p, 0)}
    if moves:
        with cluster.transaction() as tx:
            for p, (old, new) in sorted(moves.items()):
                tx.advance_consumer(consumer_path, queue_path, p, old, new)
    return moves
