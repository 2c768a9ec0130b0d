"""Ordered dynamic tables (queues) of the embedded cluster: tablets, appends, range reads and trimming.

Each tablet's counters are a row of the `tablets` SQL table (`total`: the next row index, `trimmed`:
rows below it are gone, `data_weight`: the data weight of every row written so far, kept for queues whose schema has
`$cumulative_data_weight`, which appends stamp from it); its rows are Arrow IPC chunks in `chunks`, keyed by their
first row index (the bytes in `sqlite_store`'s `blobs`, so that `place` appends a published chunk without writing it
again). This module is the only one that touches those two SQL tables.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterator, Sequence

import numpy as np  # pyarrow imports it anyway; builds index columns ~100x faster than from Python ints
import pyarrow as pa

from ..base import ORDERED, READ_BATCH_BYTES, READ_BATCH_ROWS, ROWS, TabletInfo
from ..data_weight import row_data_weights
from ..errors import ClusterError, SchemaError, TrimmedRowsError, UntrimmedTabletsError
from ..schema import CUMULATIVE_DATA_WEIGHT, ROW_INDEX, TABLET_INDEX, TIMESTAMP, TableSchema, to_arrow_table
from . import consumers
from .arrow_chunks import int64_array, rebatch, slices, split_by_tablet, tablet_targets
from .nodes import normalize_path, table, tablet_counters
from .sqlite_store import (
    STORED_CHUNK_BYTES,
    STORED_CHUNK_ROWS,
    Store,
    WriteTxn,
    chunk_bytes,
    chunk_source,
    decode_batch,
    delete_chunks,
    encode_batch,
    put_blob,
    read_chunk,
)


class QueueMixin:
    """`get_tablet_infos`, `read_tablet` and `trim_rows` of `EmbeddedCluster` (appends: `tables.insert`; reshards:
    `tree`, with `reshard_tablets`)."""

    _store: Store
    _conn: sqlite3.Connection

    def get_tablet_infos(self, path: str) -> list[TabletInfo]:
        conn = self._conn
        table(conn, path, ORDERED)
        return [TabletInfo(t, total, trimmed) for t, total, trimmed in conn.execute(
            "SELECT tablet, total, trimmed FROM tablets WHERE path=? ORDER BY tablet", (normalize_path(path),))]

    def read_tablet(self, path, tablet_index, lower, upper, *, columns=None, max_rows=READ_BATCH_ROWS,
                    max_bytes=READ_BATCH_BYTES, service_columns=False, consumer_path=None,
                    schema=None) -> Iterator[pa.RecordBatch]:
        path = normalize_path(path)
        conn = self._store.open()  # own connection: a generator may outlive this thread's other work
        try:
            conn.execute("BEGIN")  # one snapshot for the whole range
            _, schema, attrs = table(conn, path, ORDERED)
            if consumer_path is not None:
                consumers.require_registration(conn, normalize_path(consumer_path), path)
            _check_range(conn, path, tablet_index, lower, upper, attrs["tablet_count"])
            wanted = _columns(path, schema, columns)
            pieces = _range_pieces(conn, path, tablet_index, lower, upper, wanted, service_columns)
            yield from rebatch(pieces, max_rows, max_bytes)
        finally:
            conn.close()

    def read_rows_at(self, path, tablet_index, row_indexes, *, columns=None) -> pa.Table:
        path = normalize_path(path)
        conn = self._store.open()
        try:
            conn.execute("BEGIN")
            _, schema, attrs = table(conn, path, ORDERED)
            total, trimmed = tablet_counters(conn, path, tablet_index, attrs["tablet_count"])
            wanted = _columns(path, schema, columns)
            rows = sorted({int(r) for r in row_indexes if trimmed <= int(r) < total})
            chunks = conn.execute("SELECT first_row, row_count FROM chunks WHERE path=? AND tablet=? "
                                  "AND first_row + row_count > ? AND first_row <= ? ORDER BY first_row",
                                  (path, tablet_index, rows[0] if rows else 0, rows[-1] if rows else -1)).fetchall()
            pieces = []
            for first, count in chunks:
                inside = [r for r in rows if first <= r < first + count]
                if inside:
                    (data,) = conn.execute(f"SELECT {chunk_bytes('chunks')} FROM chunks WHERE path=? AND tablet=? "
                                           "AND first_row=?", (path, tablet_index, first)).fetchone()
                    picked = decode_batch(data).select(wanted).take(int64_array(np.array(inside) - first))
                    pieces.append(picked.add_column(0, ROW_INDEX, int64_array(np.array(inside))))
        finally:
            conn.close()
        if not pieces:
            empty = schema.arrow_schema()
            return pa.schema([pa.field(ROW_INDEX, pa.int64()), *(empty.field(c) for c in wanted)]).empty_table()
        return pa.concat_tables(pieces)

    def _trim_rows(self, path: str, tablet_index: int, trimmed_row_count: int) -> None:
        path = normalize_path(path)
        with WriteTxn(self._conn) as conn:
            _, _, attrs = table(conn, path, ORDERED)
            total, trimmed = tablet_counters(conn, path, tablet_index, attrs["tablet_count"])
            if trimmed_row_count > total:
                raise ClusterError(f"{path}: cannot trim tablet {tablet_index} to {trimmed_row_count}: "
                                   f"it has only {total} rows")
            new = max(trimmed, trimmed_row_count)
            conn.execute("UPDATE tablets SET trimmed=? WHERE path=? AND tablet=?", (new, path, tablet_index))
            delete_chunks(conn, "chunks", "path=? AND tablet=? AND first_row + row_count <= ?",
                          (path, tablet_index, new))


# -- storage of a queue's tablets, for the other roles (each takes the connection to run on) -------------


def create_tablets(conn: sqlite3.Connection, path: str, tablet_count: int, first: int = 0) -> None:
    """Empty tablets `[first, tablet_count)`: all of a new ordered table's, or those a reshard adds."""
    conn.executemany("INSERT INTO tablets (path, tablet, total, trimmed) VALUES (?, ?, 0, 0)",
                     [(path, t) for t in range(first, tablet_count)])


def reshard_tablets(conn: sqlite3.Connection, path: str, old_count: int, new_count: int) -> None:
    """From `old_count` tablets to `new_count` as YTsaurus reshards an ordered table: tablets below both counts keep
    their rows, indexes and trim; added tablets start empty; removed ones must be fully trimmed
    (`UntrimmedTabletsError`, nothing changed)."""
    untrimmed = {t: (trimmed, total) for t, total, trimmed in conn.execute(
        "SELECT tablet, total, trimmed FROM tablets WHERE path=? AND tablet >= ? AND trimmed < total",
        (path, new_count))}
    if untrimmed:
        raise UntrimmedTabletsError.of(path, new_count, untrimmed)
    conn.execute("DELETE FROM tablets WHERE path=? AND tablet >= ?", (path, new_count))
    delete_chunks(conn, "chunks", "path=? AND tablet >= ?", (path, new_count))
    create_tablets(conn, path, new_count, first=old_count)


def drop(conn: sqlite3.Connection, path: str) -> None:
    """Forget a table's tablets and rows (the node itself is removed by `tree`)."""
    conn.execute("DELETE FROM tablets WHERE path=?", (path,))
    delete_chunks(conn, "chunks", "path=?", (path,))


def row_count(conn: sqlite3.Connection, path: str) -> int:
    """Rows not yet trimmed, over all tablets (`@row_count`)."""
    (rows,) = conn.execute("SELECT coalesce(sum(total - trimmed), 0) FROM tablets WHERE path=?",
                           (path,)).fetchone()
    return rows


def append(conn: sqlite3.Connection, path: str, schema: TableSchema, attrs: dict, rows: ROWS,
           tablet_index: int | None) -> None:
    """Append rows to their tablets (see `Cluster.insert_rows`), stamping `$timestamp` and `$cumulative_data_weight`
    if the schema has them."""
    tablets = tablet_targets(rows, path, attrs["tablet_count"], tablet_index)
    data = to_arrow_table(schema, rows, path)
    if TIMESTAMP in schema.names:
        idx = schema.names.index(TIMESTAMP)
        stamp = pa.scalar(time.time_ns() // 1000, data.schema.field(idx).type)
        data = data.set_column(idx, TIMESTAMP, pa.repeat(stamp, data.num_rows))
    for tablet, part in split_by_tablet(data, tablets, attrs["tablet_count"]):
        if CUMULATIVE_DATA_WEIGHT in schema.names:
            part = _stamp_data_weight(conn, path, tablet, part, schema.names.index(CUMULATIVE_DATA_WEIGHT))
        pieces = list(slices(part, STORED_CHUNK_ROWS, STORED_CHUNK_BYTES))
        place(conn, path, [tablet], [put_blob(conn, encode_batch(p)) for p in pieces], [p.num_rows for p in pieces])


def _stamp_data_weight(conn: sqlite3.Connection, path: str, tablet: int, part: pa.Table, idx: int) -> pa.Table:
    """The rows with `$cumulative_data_weight` filled from the tablet's running total (which moves past them)."""
    (before,) = conn.execute("SELECT data_weight FROM tablets WHERE path=? AND tablet=?", (path, tablet)).fetchone()
    stamped = part.set_column(idx, CUMULATIVE_DATA_WEIGHT, int64_array(np.zeros(part.num_rows)))  # counts its 8 bytes
    cumulative = before + np.cumsum(row_data_weights(stamped))
    conn.execute("UPDATE tablets SET data_weight=? WHERE path=? AND tablet=?",
                 (int(cumulative[-1]) if len(cumulative) else before, path, tablet))
    field = part.schema.field(idx)
    return part.set_column(idx, field, int64_array(cumulative).cast(field.type))


def place(conn: sqlite3.Connection, path: str, tablets: list[int], blobs: list[int], counts: list[int]) -> None:
    """Append stored blobs (Arrow IPC of the table's schema, `counts` rows each) at the end of `tablets`, each
    blob whole to the tablet of these that received the fewest of its rows so far: with several tablets the
    rows spread evenly, as an insert without a tablet does, and every blob keeps its rows in order."""
    placed = dict.fromkeys(tablets, 0)
    totals = {t: conn.execute("SELECT total FROM tablets WHERE path=? AND tablet=?", (path, t)).fetchone()[0]
              for t in tablets}
    for blob, count in zip(blobs, counts, strict=True):
        tablet = min(placed, key=placed.__getitem__)
        conn.execute("INSERT INTO chunks (path, tablet, first_row, row_count, data, blob) VALUES (?, ?, ?, ?, ?, ?)",
                     (path, tablet, totals[tablet], count, b"", blob))
        totals[tablet] += count
        placed[tablet] += count
    conn.executemany("UPDATE tablets SET total=? WHERE path=? AND tablet=?",
                     [(total, path, tablet) for tablet, total in totals.items()])


def _columns(path: str, schema: TableSchema, columns: Sequence[str] | None) -> list[str]:
    """The columns a read asks for (all when None); `SchemaError` for one the table does not have."""
    wanted = list(columns) if columns is not None else schema.names
    missing = sorted(set(wanted) - set(schema.names))
    if missing:
        raise SchemaError(f"{path}: no columns {missing} in schema {schema.names}")
    return wanted


def _check_range(conn: sqlite3.Connection, path: str, tablet: int, lower: int, upper: int, count: int) -> None:
    total, trimmed = tablet_counters(conn, path, tablet, count)
    if lower > upper or upper > total:
        raise ClusterError(f"{path}: tablet {tablet} has rows [{trimmed}, {total}); cannot read [{lower}, {upper})")
    if lower < trimmed and lower < upper:
        raise TrimmedRowsError.of(path, tablet, lower, upper, trimmed)


def _range_pieces(conn: sqlite3.Connection, path: str, tablet: int, lower: int, upper: int,
                  columns: list[str], service_columns: bool) -> Iterator[pa.RecordBatch]:
    if lower >= upper:
        return
    (start,) = conn.execute("SELECT coalesce(max(first_row), 0) FROM chunks WHERE path=? AND tablet=? "
                            "AND first_row <= ?", (path, tablet, lower)).fetchone()
    cursor = conn.execute(f"SELECT first_row, row_count, {chunk_source('chunks')} FROM chunks WHERE path=? "
                          "AND tablet=? AND first_row >= ? AND first_row < ? ORDER BY first_row",
                          (path, tablet, start, upper))
    for first, count, blob, inline in cursor:
        lo, hi = max(lower, first), min(upper, first + count)
        if lo >= hi:
            continue
        piece = decode_batch(read_chunk(conn, blob, inline)).select(columns).slice(lo - first, hi - lo)
        if service_columns:
            piece = piece.add_column(0, ROW_INDEX, pa.array(np.arange(lo, hi, dtype=np.int64)))
            piece = piece.add_column(0, TABLET_INDEX, pa.repeat(pa.scalar(tablet, pa.int64()), hi - lo))
        yield from piece.to_batches()
