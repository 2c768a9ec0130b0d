"""Queue consumers of the embedded cluster: consumer tables, registrations, pull and advance.

A consumer is a sorted table with the YT consumer schema and `treat_as_queue_consumer`; its offsets are
its rows, stored like any sorted table's (`sorted_store`). Registrations are rows of the
`registrations` SQL table, which only this module touches.
"""

from __future__ import annotations

import json
import sqlite3

import pyarrow as pa

from ..base import ORDERED, PULL_ROWS, READ_BATCH_BYTES, SORTED, TABLE, Registration
from ..errors import ClusterError, ConflictError, NotRegisteredError, SchemaError
from ..schema import CONSUMER_SCHEMA, ROW_INDEX, TABLET_INDEX, TableSchema, to_arrow_table
from . import sorted_store
from .nodes import normalize_path, table, tablet_counters
from .sqlite_store import WriteTxn


class ConsumerMixin:
    """The consumer calls of `EmbeddedCluster`; `pull_consumer` reads through its `read_tablet`."""

    name: str
    _conn: sqlite3.Connection

    def create_consumer(self, path: str, *, recursive: bool = False, ignore_existing: bool = False) -> None:
        self.create(TABLE, path, recursive=recursive, ignore_existing=ignore_existing,
                    attributes={"dynamic": True, "schema": CONSUMER_SCHEMA, "treat_as_queue_consumer": True})

    def register_queue_consumer(self, queue_path, consumer_path, *, vital=False, partitions=None) -> None:
        queue_path, consumer_path = normalize_path(queue_path), normalize_path(consumer_path)
        with WriteTxn(self._conn) as conn:
            table(conn, queue_path, ORDERED)
            require_consumer(conn, consumer_path)
            conn.execute("INSERT OR REPLACE INTO registrations VALUES (?, ?, ?, ?)",
                         (queue_path, consumer_path, int(vital),
                          json.dumps(list(partitions)) if partitions is not None else None))

    def unregister_queue_consumer(self, queue_path: str, consumer_path: str) -> None:
        with WriteTxn(self._conn) as conn:  # a pair not registered: nothing to do, as in YTsaurus
            conn.execute("DELETE FROM registrations WHERE queue=? AND consumer=?",
                         (normalize_path(queue_path), normalize_path(consumer_path)))

    def list_queue_consumer_registrations(self, queue_path=None, consumer_path=None) -> list[Registration]:
        sql, args = "SELECT queue, consumer, vital, partitions FROM registrations WHERE 1=1", []
        for column, value in (("queue", queue_path), ("consumer", consumer_path)):
            if value is not None:
                sql += f" AND {column}=?"
                args.append(normalize_path(value))
        return [Registration(q, c, bool(v), tuple(json.loads(p)) if p else None)
                for q, c, v, p in self._conn.execute(sql + " ORDER BY queue, consumer", args)]

    def get_consumer_offsets(self, consumer_path: str, queue_path: str) -> dict[int, int]:
        consumer_path, queue_path = normalize_path(consumer_path), normalize_path(queue_path)
        conn = self._conn
        schema = require_consumer(conn, consumer_path)
        offsets = {}
        for row in sorted_store.select(conn, consumer_path, schema):
            if row["queue_path"] == queue_path and row["queue_cluster"] == self.name:
                offsets[row["partition_index"]] = row["offset"]
        return offsets

    def pull_consumer(self, consumer_path, queue_path, offset, partition_index, *, max_row_count=PULL_ROWS,
                      max_data_weight=READ_BATCH_BYTES) -> pa.Table:
        consumer_path, queue_path = normalize_path(consumer_path), normalize_path(queue_path)
        conn = self._conn
        require_registration(conn, consumer_path, queue_path)
        if offset is None:
            offset = self.get_consumer_offsets(consumer_path, queue_path).get(partition_index, 0)
        total, trimmed = tablet_counters(conn, queue_path, partition_index,
                                         table(conn, queue_path, ORDERED)[2]["tablet_count"])
        lower = min(max(offset, trimmed), total)  # past the end: nothing to read yet, as in YTsaurus
        upper = min(total, lower + max_row_count)
        batches = list(self.read_tablet(queue_path, partition_index, lower, upper, max_rows=max_row_count,
                                        max_bytes=max_data_weight, service_columns=True))
        if not batches:
            schema = table(conn, queue_path, ORDERED)[1].arrow_schema()
            return pa.table({TABLET_INDEX: pa.array([], pa.int64()), ROW_INDEX: pa.array([], pa.int64()),
                             **{f.name: pa.array([], f.type) for f in schema}})
        return pa.Table.from_batches(batches[:1])  # one bounded answer, as YTsaurus gives

    def advance_consumer(self, consumer_path, queue_path, partition_index, old_offset, new_offset) -> None:
        with WriteTxn(self._conn) as conn:
            advance(conn, self.name, consumer_path, queue_path, partition_index, old_offset, new_offset)


# -- shared with transactions and the tree (each takes the connection to run on) ------------------------


def require_consumer(conn: sqlite3.Connection, path: str) -> TableSchema:
    """The consumer table's schema; `SchemaError` for anything but a consumer."""
    _, schema, attrs = table(conn, path, SORTED)
    if not attrs.get("treat_as_queue_consumer"):
        raise SchemaError(f"{path}: not a consumer (a sorted table without treat_as_queue_consumer)")
    return schema


def require_registration(conn: sqlite3.Connection, consumer: str, queue: str) -> None:
    if not conn.execute("SELECT 1 FROM registrations WHERE queue=? AND consumer=?",
                        (queue, consumer)).fetchone():
        raise NotRegisteredError(f"consumer {consumer} is not registered for queue {queue} "
                                 f"(register it: opsd consumer register {queue} {consumer})")


def drop_registrations(conn: sqlite3.Connection, path: str) -> None:
    """Forget every registration naming `path`, as queue or as consumer."""
    conn.execute("DELETE FROM registrations WHERE queue=? OR consumer=?", (path, path))


def advance(conn: sqlite3.Connection, cluster_name: str, consumer_path: str, queue_path: str,
            partition_index: int, old_offset: int | None, new_offset: int) -> None:
    """`advance_consumer` on `conn` (see `Cluster.advance_consumer`); `cluster_name` is `queue_cluster`."""
    consumer_path, queue_path = normalize_path(consumer_path), normalize_path(queue_path)
    schema = require_consumer(conn, consumer_path)
    require_registration(conn, consumer_path, queue_path)
    _, _, attrs = table(conn, queue_path, ORDERED)
    if not 0 <= partition_index < attrs["tablet_count"]:
        raise ClusterError(f"{queue_path}: no partition {partition_index} "
                           f"(the queue has {attrs['tablet_count']} partitions)")
    if new_offset < 0:
        raise ClusterError(f"{consumer_path}: offset must not be negative, got {new_offset}")
    key = {"queue_cluster": cluster_name, "queue_path": queue_path, "partition_index": partition_index}
    current = sorted_store.lookup(conn, consumer_path, schema, [key])
    stored = current[0]["offset"] if current else 0
    if old_offset is not None and stored != old_offset:
        raise ConflictError(f"{consumer_path}: offset of {queue_path} partition {partition_index} is {stored}, "
                            f"not the expected old_offset {old_offset}")
    row = {**key, "offset": new_offset, "meta": current[0]["meta"] if current else None}
    sorted_store.upsert(conn, consumer_path, schema, to_arrow_table(schema, [row], consumer_path))
