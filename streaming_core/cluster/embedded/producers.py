"""Queue producers of the embedded cluster: producer tables, sessions and pushes.

A producer is a sorted table with `PRODUCER_SCHEMA` and `treat_as_queue_producer`; each session is one of its rows
(stored like any sorted table's, `sorted_store`), keyed by (queue cluster, queue path, session id). A push checks the
epoch and the sequence numbers, appends the rows not written before (`queues.append`) and moves the session, on one
connection: the write transaction of the call or of the caller's tablet transaction, so a push and a consumer advance
commit together. The rules are YTsaurus' (`yt/yt/client/queue_client/helpers.cpp` `ValidatePushQueueProducerRows`).
"""

from __future__ import annotations

import sqlite3
from typing import Any

import pyarrow as pa
from yt import yson

from ..base import ORDERED, ROWS, SORTED, TABLE, ProducerSession, PushResult
from ..errors import InvalidEpochError, NoSuchProducerSessionError, SchemaError, ZombieEpochError
from ..producer_rows import sequence_numbers, skipped_rows
from ..schema import PRODUCER_SCHEMA, TableSchema, to_arrow_table
from ..yson_values import plain
from . import queues, sorted_store
from .nodes import normalize_path, table
from .sqlite_store import WriteTxn


class ProducerMixin:
    """The producer calls of `EmbeddedCluster`."""

    name: str
    _conn: sqlite3.Connection

    def create_queue_producer(self, path: str, *, recursive: bool = False, ignore_existing: bool = False) -> None:
        self.create(TABLE, path, recursive=recursive, ignore_existing=ignore_existing,
                    attributes={"dynamic": True, "schema": PRODUCER_SCHEMA, "treat_as_queue_producer": True})

    def create_queue_producer_session(self, producer_path, queue_path, session_id, user_meta=None) -> ProducerSession:
        with WriteTxn(self._conn) as conn:
            return open_session(conn, self.name, producer_path, queue_path, session_id, user_meta)

    def remove_queue_producer_session(self, producer_path, queue_path, session_id) -> None:
        producer_path, queue_path = normalize_path(producer_path), normalize_path(queue_path)
        with WriteTxn(self._conn) as conn:
            schema = require_producer(conn, producer_path)
            sorted_store.delete(conn, producer_path, schema, [_key(self.name, queue_path, session_id)])

    def push_queue_producer(self, producer_path, queue_path, session_id, epoch, rows, *, sequence_number=None,
                            user_meta=None) -> PushResult:
        with WriteTxn(self._conn) as conn:
            return push(conn, self.name, producer_path, queue_path, session_id, epoch, rows,
                        sequence_number=sequence_number, user_meta=user_meta)


# -- shared with transactions (each takes the connection to run on) ------------------------------------


def require_producer(conn: sqlite3.Connection, path: str) -> TableSchema:
    """The producer table's schema; `SchemaError` for anything but a producer."""
    _, schema, attrs = table(conn, path, SORTED)
    if not attrs.get("treat_as_queue_producer"):
        raise SchemaError(f"{path}: not a queue producer (a sorted table without treat_as_queue_producer; "
                          f"create one with opsd producer create)")
    return schema


def open_session(conn: sqlite3.Connection, cluster_name: str, producer_path: str, queue_path: str,
                 session_id: str, user_meta: Any) -> ProducerSession:
    """`create_queue_producer_session` on `conn`: a new session, or the stored one with its epoch bumped."""
    producer_path, queue_path = normalize_path(producer_path), normalize_path(queue_path)
    schema = require_producer(conn, producer_path)
    table(conn, queue_path, ORDERED)
    stored = _session(conn, schema, cluster_name, producer_path, queue_path, session_id)
    if stored is None:
        session = ProducerSession(epoch=0, sequence_number=-1, user_meta=user_meta)
    else:
        session = ProducerSession(epoch=stored.epoch + 1, sequence_number=stored.sequence_number,
                                  user_meta=stored.user_meta if user_meta is None else user_meta)
    _store(conn, schema, cluster_name, producer_path, queue_path, session_id, session)
    return session


def push(conn: sqlite3.Connection, cluster_name: str, producer_path: str, queue_path: str, session_id: str,
         epoch: int, rows: ROWS, *, sequence_number: int | None, user_meta: Any) -> PushResult:
    """`push_queue_producer` on `conn` (see `Cluster.push_queue_producer`)."""
    producer_path, queue_path = normalize_path(producer_path), normalize_path(queue_path)
    schema = require_producer(conn, producer_path)
    _, queue_schema, attrs = table(conn, queue_path, ORDERED)
    stored = _session(conn, schema, cluster_name, producer_path, queue_path, session_id)
    if stored is None:
        raise NoSuchProducerSessionError(
            f"{producer_path}: no session {session_id!r} for queue {queue_path} (create_queue_producer_session "
            f"first)")
    if epoch < stored.epoch:
        raise ZombieEpochError(
            f"{producer_path}: session {session_id!r} of {queue_path} is at epoch {stored.epoch}, the push's epoch "
            f"{epoch} is older: the session was created again since, so this writer is fenced off (a zombie)")
    if epoch > stored.epoch:
        raise InvalidEpochError(f"{producer_path}: session {session_id!r} of {queue_path} is at epoch "
                                f"{stored.epoch}, the push's epoch {epoch} was never given out")
    data = rows if isinstance(rows, pa.Table) else _as_table(rows)
    numbers = sequence_numbers(data, sequence_number, queue_path)
    skipped = skipped_rows(numbers, stored.sequence_number)
    fresh = data.slice(skipped)
    if fresh.num_rows:
        queues.append(conn, queue_path, queue_schema, attrs, fresh, None)
    last = int(numbers[-1]) if len(numbers) else -1
    moved = ProducerSession(epoch=stored.epoch, sequence_number=max(last, stored.sequence_number),
                            user_meta=stored.user_meta if user_meta is None else user_meta)
    _store(conn, schema, cluster_name, producer_path, queue_path, session_id, moved)
    return PushResult(last_sequence_number=last, skipped_row_count=skipped)


def _as_table(rows: ROWS) -> pa.Table:
    if isinstance(rows, pa.RecordBatch):
        return pa.Table.from_batches([rows])
    return pa.Table.from_pylist(list(rows))


def _key(cluster_name: str, queue_path: str, session_id: str) -> dict[str, Any]:
    return {"queue_cluster": cluster_name, "queue_path": queue_path, "session_id": str(session_id)}


def _session(conn: sqlite3.Connection, schema: TableSchema, cluster_name: str, producer_path: str,
             queue_path: str, session_id: str) -> ProducerSession | None:
    found = sorted_store.lookup(conn, producer_path, schema, [_key(cluster_name, queue_path, session_id)])
    if not found:
        return None
    meta = found[0]["user_meta"]
    return ProducerSession(epoch=found[0]["epoch"], sequence_number=found[0]["sequence_number"],
                           user_meta=None if meta is None else plain(yson.loads(meta)))


def _store(conn: sqlite3.Connection, schema: TableSchema, cluster_name: str, producer_path: str, queue_path: str,
           session_id: str, session: ProducerSession) -> None:
    row = {**_key(cluster_name, queue_path, session_id), "epoch": session.epoch,
           "sequence_number": session.sequence_number,
           "user_meta": None if session.user_meta is None else yson.dumps(session.user_meta, yson_format="binary")}
    sorted_store.upsert(conn, producer_path, schema, to_arrow_table(schema, [row], producer_path))
