"""How the embedded cluster stores the rows of sorted dynamic tables (consumers included).

One SQLite row per table row in the `sorted_rows` SQL table: the key columns' values as JSON text, the
row pickled. This is the only module that reads or writes `sorted_rows` (its DDL stands with the others
in `sqlite_store`), so this storage can be replaced alone. Callers check the table's kind and schema
first; every function takes the connection to run on and a normalized path.
"""

from __future__ import annotations

import json
import pickle
import sqlite3
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

from ..errors import SchemaError

#: Keys as JSON text (one encoder: `json.dumps(default=...)` builds a new one per call).
_KEY_ENCODER = json.JSONEncoder(default=str)


def key_text(row: Mapping[str, Any], key_columns: Sequence[str], path: str) -> str:
    """The stored key of a row or key; `SchemaError` when a key column is missing."""
    missing = [k for k in key_columns if k not in row]
    if missing:
        raise SchemaError(f"{path}: key columns {missing} missing in {dict(row)!r}")
    return _KEY_ENCODER.encode([row[k] for k in key_columns])


def upsert(conn: sqlite3.Connection, path: str, key_columns: Sequence[str], rows: Iterable[dict[str, Any]]) -> None:
    """Write whole rows, replacing any stored row with the same key."""
    conn.executemany("INSERT OR REPLACE INTO sorted_rows VALUES (?, ?, ?)",
                     [(path, key_text(row, key_columns, path), pickle.dumps(row)) for row in rows])


def delete(conn: sqlite3.Connection, path: str, key_columns: Sequence[str], keys: Iterable[Mapping]) -> None:
    """Delete the rows with these keys (absent keys are no error)."""
    for key in keys:
        conn.execute("DELETE FROM sorted_rows WHERE path=? AND key=?", (path, key_text(key, key_columns, path)))


def lookup(conn: sqlite3.Connection, path: str, key_columns: Sequence[str], keys: Iterable[Mapping]) -> list:
    """The stored rows for these keys, in the keys' order; absent keys are skipped."""
    found = []
    for key in keys:
        row = conn.execute("SELECT row FROM sorted_rows WHERE path=? AND key=?",
                           (path, key_text(key, key_columns, path))).fetchone()
        if row is not None:
            found.append(pickle.loads(row[0]))
    return found


def scan(conn: sqlite3.Connection, path: str) -> Iterator[dict[str, Any]]:
    """Every row of the table, in no particular order."""
    for (blob,) in conn.execute("SELECT row FROM sorted_rows WHERE path=?", (path,)):
        yield pickle.loads(blob)


def select(conn: sqlite3.Connection, path: str, key_columns: Sequence[str]) -> list[dict[str, Any]]:
    """Every row of the table in key order, nulls first (as YTsaurus sorts)."""
    return sorted(scan(conn, path), key=lambda r: _sort_key([r[k] for k in key_columns]))


def _sort_key(values: Sequence[Any]) -> tuple:
    return tuple((v is not None, v) for v in values)


def row_count(conn: sqlite3.Connection, path: str) -> int:
    (rows,) = conn.execute("SELECT count(*) FROM sorted_rows WHERE path=?", (path,)).fetchone()
    return rows


def drop(conn: sqlite3.Connection, path: str) -> None:
    """Forget every row of the table (the node itself is removed by `tree`)."""
    conn.execute("DELETE FROM sorted_rows WHERE path=?", (path,))
