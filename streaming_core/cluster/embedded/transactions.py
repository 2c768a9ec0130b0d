"""Tablet transactions of the embedded cluster: one SQLite write transaction on a connection of its own.

Each call runs the same function as the plain call (`tables`, `consumers`, `producers`) on the transaction's
connection, so lookups see the transaction's own writes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..base import PushResult, Transaction
from .consumers import advance
from .nodes import normalize_path
from .producers import push
from .tables import delete, insert, lookup, publish

if TYPE_CHECKING:
    from . import EmbeddedCluster


class EmbeddedTransaction(Transaction):
    """A SQLite write transaction on a connection of its own; commit is atomic, a crash leaves nothing."""

    def __init__(self, cluster: EmbeddedCluster) -> None:
        self._cluster = cluster
        self._conn = cluster._store.open()
        self._conn.execute("BEGIN IMMEDIATE")

    def insert_rows(self, path, rows, *, tablet_index=None) -> None:
        insert(self._conn, normalize_path(path), rows, tablet_index)

    def delete_rows(self, path, keys) -> None:
        delete(self._conn, normalize_path(path), keys)

    def lookup_rows(self, path, keys) -> list[dict[str, Any]]:
        return lookup(self._conn, normalize_path(path), keys)

    def advance_consumer(self, consumer_path, queue_path, partition_index, old_offset, new_offset) -> None:
        advance(self._conn, self._cluster.name, consumer_path, queue_path, partition_index, old_offset, new_offset)

    def push_queue_producer(self, producer_path, queue_path, session_id, epoch, rows, *, sequence_number=None,
                            user_meta=None) -> PushResult:
        return push(self._conn, self._cluster.name, producer_path, queue_path, session_id, epoch, rows,
                    sequence_number=sequence_number, user_meta=user_meta)

    def publish_table(self, source, path) -> int:
        return publish(self._conn, normalize_path(source), normalize_path(path))

    def commit(self) -> None:
        try:
            self._conn.execute("COMMIT")
        finally:
            self._conn.close()

    def abort(self) -> None:
        try:
            self._conn.execute("ROLLBACK")
        finally:
            self._conn.close()
