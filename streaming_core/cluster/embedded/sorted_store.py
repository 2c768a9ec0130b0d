"""How the embedded cluster stores the rows of sorted dynamic tables (consumers included): a log of Arrow
chunks, newest wins, compacted as it grows.

Every upsert call adds one *run*: the rows as given, Arrow IPC pieces of the table's schema; every delete
call adds a run of *tombstones* (the key columns only). Both are rows of the `sorted_chunks` SQL table
(path, run, piece -> blob), which only this module touches (its DDL stands with the others in
`sqlite_store`, which keeps the pieces' bytes in `blobs`); a published static table's blobs become a run
as they are (`add_run`).
A read merges the runs: a stable sort of every stored key in write order keeps the last row of each key,
and a key whose last row is a tombstone is gone. Writes thus cost what a queue append costs (no per-row
Python, no key encoding); reads pay the merge, which compaction bounds: past `MAX_RUNS` runs, the newest
two runs, and the runs before them while each is no bigger than all newer ones together, are merged into
one (sorted, one row per key), so the number of runs stays small and few rows are rewritten (size-tiered).

Nothing here unpickles: stored data is Arrow IPC, which describes buffers and cannot run code when read.
Roots written before this layout kept pickled rows in `sorted_rows`; such a table is refused by name
(`LegacyLayoutError`) rather than read. Every function takes the connection to run on (writes run inside
the caller's write transaction) and a normalized path; callers check the table's kind and schema first.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..errors import ClusterError, SchemaError
from ..schema import TableSchema, to_arrow_table
from .arrow_chunks import bool_array, int64_array, slices
from .sqlite_store import STORED_CHUNK_BYTES, STORED_CHUNK_ROWS, decode_batch, delete_chunks, encode_batch, put_blob

#: Runs a table may have before a write compacts the newest ones: bounds what a read merges.
MAX_RUNS = 16
#: The column a merge adds: a row's place among the upsert pieces, null for a tombstone (`$`: no schema column).
_POSITION = "$position"


class LegacyLayoutError(ClusterError):
    """A sorted table still stored in the layout of earlier versions (pickled rows), which is never read."""


def upsert(conn: sqlite3.Connection, path: str, schema: TableSchema, data: pa.Table) -> None:
    """Add `data` (already in the table's schema) as one run: each row replaces any earlier row of its key,
    the last of equal keys within `data` winning."""
    _add_pieces(conn, path, schema, list(slices(data, STORED_CHUNK_ROWS, STORED_CHUNK_BYTES)), tombstones=False)


def _add_pieces(conn: sqlite3.Connection, path: str, schema: TableSchema, pieces: list[pa.RecordBatch], *,
                tombstones: bool) -> None:
    add_run(conn, path, schema, [put_blob(conn, encode_batch(p)) for p in pieces], [p.num_rows for p in pieces],
            tombstones=tombstones)


def add_run(conn: sqlite3.Connection, path: str, schema: TableSchema, blobs: Sequence[int],
            rows: Sequence[int], *, tombstones: bool = False) -> None:
    """Make stored blobs (Arrow IPC of the table's schema, or of its key columns for tombstones; `rows`
    rows each) the pieces of one new run."""
    _refuse_legacy(conn, path)
    if not blobs:
        return
    (run,) = conn.execute("SELECT coalesce(max(run), -1) + 1 FROM sorted_chunks WHERE path=?", (path,)).fetchone()
    _insert_run(conn, path, run, [(n, tombstones, blob) for n, blob in zip(rows, blobs, strict=True)])
    _compact(conn, path, schema)


def _insert_run(conn: sqlite3.Connection, path: str, run: int, pieces: list[tuple[int, bool, int]]) -> None:
    """Rows of `sorted_chunks` for the (row count, tombstones, blob) pieces of one run."""
    conn.executemany("INSERT INTO sorted_chunks (path, run, piece, row_count, tombstones, blob) "
                     "VALUES (?, ?, ?, ?, ?, ?)",
                     [(path, run, i, n, int(tomb), blob) for i, (n, tomb, blob) in enumerate(pieces)])


def delete(conn: sqlite3.Connection, path: str, schema: TableSchema, keys: Iterable[Mapping]) -> None:
    """Delete the rows with these keys (absent keys are no error)."""
    _add_pieces(conn, path, schema, list(slices(key_table(schema, keys, path), STORED_CHUNK_ROWS, STORED_CHUNK_BYTES)),
                tombstones=True)


def lookup(conn: sqlite3.Connection, path: str, schema: TableSchema, keys: Iterable[Mapping]) -> list[dict]:
    """The stored rows for these keys, in the keys' order; absent keys are skipped."""
    wanted = key_table(schema, keys, path)
    if wanted.num_rows == 0:
        return []
    key_columns = schema.key_columns
    found = _merge(_runs(conn, path), schema, wanted).to_pylist()
    by_key = {tuple(row[k] for k in key_columns): row for row in found}
    hits = (by_key.get(tuple(key[k] for k in key_columns)) for key in wanted.to_pylist())
    return [row for row in hits if row is not None]


def read(conn: sqlite3.Connection, path: str, schema: TableSchema) -> pa.Table:
    """Every live row of the table in key order, nulls first (as YTsaurus sorts)."""
    return _merge(_runs(conn, path), schema)


def select(conn: sqlite3.Connection, path: str, schema: TableSchema) -> list[dict[str, Any]]:
    return read(conn, path, schema).to_pylist()


def row_count(conn: sqlite3.Connection, path: str, schema: TableSchema) -> int:
    _, winners = _winners(_runs(conn, path), schema)
    return winners.num_rows - winners.column(_POSITION).null_count


def drop(conn: sqlite3.Connection, path: str) -> None:
    """Forget every row of the table, of this layout and of the earlier one (the node is removed by `tree`).

    Deleting the earlier layout's rows reads none of them: removing a table is how to leave that layout.
    """
    delete_chunks(conn, "sorted_chunks", "path=?", (path,))
    if _has_legacy_table(conn):
        conn.execute("DELETE FROM sorted_rows WHERE path=?", (path,))


def key_table(schema: TableSchema, keys: Iterable[Mapping], path: str) -> pa.Table:
    """Keys (mappings) as an Arrow table of the key columns; `SchemaError` when a key column is missing."""
    key_columns = schema.key_columns
    keys = list(keys)
    for key in keys:
        missing = [k for k in key_columns if k not in key]
        if missing:
            raise SchemaError(f"{path}: key columns {missing} missing in {dict(key)!r}")
    key_schema = TableSchema(tuple(schema.column(k) for k in key_columns))
    return to_arrow_table(key_schema, [{k: key[k] for k in key_columns} for key in keys], path)


# -- runs and their merge --------------------------------------------------------------------------------


def _runs(conn: sqlite3.Connection, path: str, first_run: int = 0) -> list[tuple[int, bool, pa.Table]]:
    """(run, tombstones, piece) from `first_run` on in write order, read in one statement (one snapshot)."""
    _refuse_legacy(conn, path)
    rows = conn.execute("SELECT run, tombstones, blobs.data FROM sorted_chunks JOIN blobs ON blobs.id = blob "
                        "WHERE path=? AND run >= ? ORDER BY run, piece", (path, first_run)).fetchall()
    return [(run, bool(tomb), decode_batch(data)) for run, tomb, data in rows]


def _merge(runs: list[tuple[int, bool, pa.Table]], schema: TableSchema, wanted: pa.Table | None = None) -> pa.Table:
    """The newest row of every key over `runs` (in write order), in key order, tombstoned keys dropped.

    With `wanted`, only rows whose key columns each take a value of `wanted` are considered (a lookup).
    """
    data, winners = _winners(runs, schema, wanted)
    return _take_live(data, winners, schema)


def _winners(runs: list[tuple[int, bool, pa.Table]], schema: TableSchema,
             wanted: pa.Table | None = None) -> tuple[list[pa.Table], pa.Table]:
    """(upsert pieces, winners): the key columns and `_POSITION` of the newest row of each key, in key order.

    A winner's position indexes the upsert pieces concatenated; null marks a tombstone. Nothing here converts
    a Python value to Arrow (see `arrow_chunks.int64_array`): consumer offsets are read this way when a
    query starts.
    """
    key_columns = schema.key_columns
    data, keys, offset = [], [], 0
    for _, tombstone, piece in runs:
        if wanted is not None:
            piece = piece.filter(_matching(piece, wanted))
        if tombstone:
            positions = pa.nulls(piece.num_rows, pa.int64())
        else:
            data.append(piece)
            positions = int64_array(np.arange(offset, offset + piece.num_rows))
            offset += piece.num_rows
        keys.append(piece.select(key_columns).append_column(_POSITION, positions))
    if not keys:
        return data, pa.Table.from_batches([], pa.schema([*(schema.column(k).arrow_field() for k in key_columns),
                                                          pa.field(_POSITION, pa.int64())]))
    stored = pa.concat_tables(keys).combine_chunks()
    try:
        order = pc.sort_indices(stored, sort_keys=[(k, "ascending", "at_start") for k in key_columns])
    except (pa.ArrowNotImplementedError, pa.ArrowTypeError) as e:
        raise SchemaError(f"key columns {key_columns}: cannot order values of their types ({e})") from None
    ordered = stored.take(order)
    return data, ordered.filter(_last_of_each_key(ordered, key_columns))


def _take_live(data: list[pa.Table], winners: pa.Table, schema: TableSchema) -> pa.Table:
    """The winning upsert rows, in the winners' (key) order."""
    positions = winners.column(_POSITION).drop_null()
    if not data or len(positions) == 0:
        return pa.Table.from_batches([], schema.arrow_schema())
    return pa.concat_tables(data).take(positions)


def _matching(piece: pa.Table, wanted: pa.Table) -> pa.Array:
    """Rows whose every key column takes one of the wanted values (a superset of the wanted keys)."""
    mask = None
    for name in wanted.column_names:
        hit = pc.is_in(piece.column(name), value_set=wanted.column(name).combine_chunks())
        mask = hit if mask is None else pc.and_(mask, hit)
    return mask


def _last_of_each_key(ordered: pa.Table, key_columns: list[str]) -> pa.Array:
    """True for each row whose key differs from the next row's (in a table sorted by key, stably)."""
    n = ordered.num_rows
    if n == 0:
        return bool_array(np.zeros(0, bool))
    same = None
    for name in key_columns:
        column = ordered.column(name).combine_chunks()
        here, after = column.slice(0, n - 1), column.slice(1)
        both_null = pc.and_(pc.is_null(here), pc.is_null(after))
        compared = pc.equal(here, after)
        equal = pc.or_(pc.and_kleene(compared, pc.is_valid(compared)), both_null)  # null (one side null): False
        same = equal if same is None else pc.and_(same, equal)
    return pa.concat_arrays([pc.invert(same), bool_array(np.ones(1, bool))])


# -- compaction --------------------------------------------------------------------------------------------


def _compact(conn: sqlite3.Connection, path: str, schema: TableSchema) -> None:
    """Past `MAX_RUNS` runs, merge the newest two runs, and the runs before them while those are no
    bigger than all the runs after them, into one run (size-tiered: runs stay few and roughly geometric in size)."""
    sizes = conn.execute("SELECT run, sum(row_count) FROM sorted_chunks WHERE path=? GROUP BY run ORDER BY run",
                         (path,)).fetchall()
    if len(sizes) <= MAX_RUNS:
        return
    start, newer = len(sizes) - 2, sizes[-1][1] + sizes[-2][1]  # at least two runs, or nothing would shrink
    while start > 0 and sizes[start - 1][1] <= newer:
        start -= 1
        newer += sizes[start][1]
    first_run = sizes[start][0]
    data, winners = _winners(_runs(conn, path, first_run), schema)
    live = _take_live(data, winners, schema)
    # tombstones still shadow rows of older runs; with no older run left they have nothing to hide
    dead = winners.filter(pc.is_null(winners.column(_POSITION))).select(schema.key_columns) if start else None
    delete_chunks(conn, "sorted_chunks", "path=? AND run >= ?", (path, first_run))
    _store_merged(conn, path, first_run, live, dead)


def _store_merged(conn: sqlite3.Connection, path: str, run: int, live: pa.Table, dead: pa.Table | None) -> None:
    """The merged run: live rows (one per key, sorted) and the tombstones that still shadow older runs.

    Both sets hold distinct keys, so they share one run number without any order between them.
    """
    _insert_run(conn, path, run, [(chunk.num_rows, tombstones, put_blob(conn, encode_batch(chunk)))
                                  for tombstones, part in ((False, live), (True, dead)) if part is not None
                                  for chunk in slices(part, STORED_CHUNK_ROWS, STORED_CHUNK_BYTES)])


# -- the earlier layout ------------------------------------------------------------------------------------


def _has_legacy_table(conn: sqlite3.Connection) -> bool:
    return conn.execute("SELECT 1 FROM sqlite_master WHERE type='table' AND name='sorted_rows'").fetchone() is not None


def _refuse_legacy(conn: sqlite3.Connection, path: str) -> None:
    """`LegacyLayoutError` naming the table and the way out when it still has rows of the earlier layout."""
    if _has_legacy_table(conn) and conn.execute("SELECT 1 FROM sorted_rows WHERE path=? LIMIT 1",
                                                (path,)).fetchone():
        raise LegacyLayoutError(
            f"{path}: this sorted table is stored in the layout of earlier versions (pickled rows in the SQL "
            f"table sorted_rows), which this version never reads, as unpickling can run code. To migrate, read "
            f"its rows with the version that wrote them (cluster.select_rows({path!r})), then remove the table "
            f"(cluster.remove, which drops the old rows unread), create it again and insert the rows")
