"""Row calls on sorted dynamic and static tables of the embedded cluster: upsert, delete, lookup, select,
and static tables written and read whole. `insert_rows` also appends to queues (through `queues.append`).

Sorted rows are stored by `sorted_store`; static tables are Arrow IPC chunks in the `static_chunks` SQL
table, which only this module touches. A static table with key columns is read in key order. `publish`
moves a static table's chunks into a dynamic table (the transactional sink's commit).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

import pyarrow as pa

from ..base import ORDERED, READ_BATCH_BYTES, READ_BATCH_ROWS, ROWS, SORTED, STATIC
from ..schema import STAMPED_COLUMNS, TableSchema, to_arrow_table
from . import queues, sorted_store
from .arrow_chunks import rebatch, slices
from .nodes import normalize_path, table
from .sqlite_store import (
    STORED_CHUNK_BYTES,
    STORED_CHUNK_ROWS,
    WriteTxn,
    chunk_bytes,
    decode_batch,
    delete_chunks,
    encode_batch,
    put_blob,
)


class TableMixin:
    """`insert_rows`, `delete_rows`, `lookup_rows`, `select_rows`, `write_table`, `read_table` of
    `EmbeddedCluster`."""

    _conn: sqlite3.Connection

    def insert_rows(self, path: str, rows: ROWS, *, tablet_index: int | None = None) -> None:
        with WriteTxn(self._conn) as conn:
            insert(conn, normalize_path(path), rows, tablet_index)

    def delete_rows(self, path: str, keys: Iterable[Mapping[str, Any]]) -> None:
        with WriteTxn(self._conn) as conn:
            delete(conn, normalize_path(path), keys)

    def lookup_rows(self, path: str, keys: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
        return lookup(self._conn, normalize_path(path), keys)

    def select_rows(self, path: str) -> list[dict[str, Any]]:
        path = normalize_path(path)
        conn = self._conn
        _, schema, _ = table(conn, path, SORTED)
        return sorted_store.select(conn, path, schema)

    def write_table(self, path: str, rows: ROWS, *, append: bool = False) -> None:
        path = normalize_path(path)
        with WriteTxn(self._conn) as conn:
            _, schema, _ = table(conn, path, STATIC)
            data = to_arrow_table(schema, rows, path)
            if not append:
                drop_static(conn, path)
            (seq,) = conn.execute("SELECT coalesce(max(seq), -1) + 1 FROM static_chunks WHERE path=?",
                                  (path,)).fetchone()
            for i, piece in enumerate(slices(data, STORED_CHUNK_ROWS, STORED_CHUNK_BYTES)):
                conn.execute("INSERT INTO static_chunks (path, seq, data, row_count, blob) VALUES (?, ?, ?, ?, ?)",
                             (path, seq + i, b"", piece.num_rows, put_blob(conn, encode_batch(piece))))

    def read_table(self, path: str, *, max_rows: int = READ_BATCH_ROWS) -> Iterator[pa.RecordBatch]:
        path = normalize_path(path)
        conn = self._conn
        kind, schema, _ = table(conn, path, STATIC, SORTED)
        if kind == SORTED:
            yield from sorted_store.read(conn, path, schema).to_batches(max_chunksize=max_rows)
            return
        pieces = _static_pieces(conn, path)
        if schema.key_columns:
            pieces = _in_key_order(pieces, schema)
        yield from rebatch(pieces, max_rows, READ_BATCH_BYTES)


def _in_key_order(pieces: Iterator[pa.RecordBatch], schema: TableSchema) -> Iterator[pa.RecordBatch]:
    """A sorted static table's rows in key order, whatever order parallel writers appended them in.

    The embedded cluster sorts when reading (in memory): static tables here are small.
    """
    data = pa.Table.from_batches(list(pieces), schema=schema.arrow_schema())
    yield from data.sort_by([(k, "ascending") for k in schema.key_columns]).to_batches()


# -- shared with transactions and the tree (each takes the connection to run on and a normalized path) -----


def insert(conn: sqlite3.Connection, path: str, rows: ROWS, tablet_index: int | None) -> None:
    """Append to an ordered table or upsert into a sorted one (see `Cluster.insert_rows`)."""
    kind, schema, attrs = table(conn, path, ORDERED, SORTED)
    if not isinstance(rows, pa.Table | pa.RecordBatch | list):
        rows = list(rows)
    if kind == ORDERED:
        queues.append(conn, path, schema, attrs, rows, tablet_index)
        return
    sorted_store.upsert(conn, path, schema, to_arrow_table(schema, rows, path))


def publish(conn: sqlite3.Connection, source: str, path: str) -> int:
    """`Transaction.publish_table`: the static table's stored chunks become chunks of `path` as they are.

    Staged rows are already in the target's Arrow schema, so each chunk's blob is placed on a tablet
    (ordered) or becomes a piece of one new run (sorted): a few small rows change, the rows' bytes are
    neither decoded nor written again. Only when the stored form differs (another schema, a `$timestamp` or
    `$cumulative_data_weight` column to stamp, chunks of an earlier layout without a blob) are the rows inserted,
    chunk by chunk.
    `source` is left empty.
    """
    _, staged, _ = table(conn, source, STATIC)
    kind, schema, attrs = table(conn, path, ORDERED, SORTED)
    chunks = conn.execute("SELECT blob, row_count FROM static_chunks WHERE path=? ORDER BY seq", (source,)).fetchall()
    if staged.arrow_schema() != schema.arrow_schema() or set(STAMPED_COLUMNS) & set(schema.names) \
            or any(blob is None for blob, _ in chunks):
        rows = 0
        for batch in rebatch(_static_pieces(conn, source), READ_BATCH_ROWS, READ_BATCH_BYTES):
            insert(conn, path, batch, None)
            rows += batch.num_rows
        drop_static(conn, source)
        return rows
    conn.execute("DELETE FROM static_chunks WHERE path=?", (source,))  # the blobs now belong to `path`
    blobs, counts = [blob for blob, _ in chunks], [count for _, count in chunks]
    if kind == ORDERED:
        queues.place(conn, path, list(range(attrs["tablet_count"])), blobs, counts)
    else:
        sorted_store.add_run(conn, path, schema, blobs, counts)
    return sum(counts)


def delete(conn: sqlite3.Connection, path: str, keys: Iterable[Mapping]) -> None:
    _, schema, _ = table(conn, path, SORTED)
    sorted_store.delete(conn, path, schema, keys)


def lookup(conn: sqlite3.Connection, path: str, keys: Iterable[Mapping]) -> list:
    _, schema, _ = table(conn, path, SORTED)
    return sorted_store.lookup(conn, path, schema, keys)


def static_row_count(conn: sqlite3.Connection, path: str) -> int:
    counted, = conn.execute("SELECT coalesce(sum(row_count), 0) FROM static_chunks WHERE path=?", (path,)).fetchone()
    return counted + sum(decode_batch(d).num_rows for (d,) in conn.execute(  # chunks of an earlier layout
        "SELECT data FROM static_chunks WHERE path=? AND row_count IS NULL", (path,)))


def _static_pieces(conn: sqlite3.Connection, path: str) -> Iterator[pa.RecordBatch]:
    """A static table's rows, chunk by chunk in write order."""
    blobs = [d for (d,) in conn.execute(f"SELECT {chunk_bytes('static_chunks')} FROM static_chunks WHERE path=? "
                                        "ORDER BY seq", (path,))]
    return (b for d in blobs for b in decode_batch(d).to_batches())


def move_static(conn: sqlite3.Connection, source: str, destination: str) -> None:
    """Give a static table's rows to its new path (the node itself is moved by `tree`)."""
    conn.execute("UPDATE static_chunks SET path=? WHERE path=?", (destination, source))


def drop_static(conn: sqlite3.Connection, path: str) -> None:
    """Forget a static table's rows (the node itself is removed by `tree`)."""
    delete_chunks(conn, "static_chunks", "path=?", (path,))
