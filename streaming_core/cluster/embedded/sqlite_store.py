"""The embedded cluster's storage: one SQLite database in WAL mode under the cluster root.

Why SQLite: it is in the standard library, several processes (Spark's Python workers, the streaming
source runner, opsd) may read and write one file at once, and a transaction either commits whole or
leaves nothing, also when the process is killed. `synchronous=NORMAL` in WAL mode keeps every committed
transaction across process crashes (a power loss may lose the last ones).

Rows of every table kind are stored as Arrow IPC chunks, not row by row: queue chunks (one blob per
appended slice of a tablet, keyed by its first row index), static table chunks, and the runs of sorted
tables (`sorted_store`). Appends, upserts and range reads then move columnar buffers instead of Python
objects, which is what lets the embedded cluster feed Spark at hundreds of thousands of rows per second
(`python -m bench.cluster`), and no stored byte can run code when read (no pickle).
"""

from __future__ import annotations

import os
import sqlite3
import threading
from pathlib import Path

import pyarrow as pa

from ..timing import DECODE

DB_FILE = "cluster.db"
BUSY_TIMEOUT_MS = 60_000
#: Rows and bytes per stored Arrow blob (a queue's chunk, a static table's chunk, a sorted table's piece): bounds what
#: one blob holds, and so what a range read must decode beyond its range.
STORED_CHUNK_ROWS = 16_384
STORED_CHUNK_BYTES = 4 * 1024 * 1024

#: Each SQL table below belongs to one role of this package, whose module alone writes it (the package
#: docstring names them): a new storage layout for one role changes that module and its tables here.
#: `blobs` belongs to this module: the Arrow IPC bytes of every chunk, which the chunk tables name by id
#: (`blob`), so that a chunk moves between tables (`tables.publish`) without its bytes being written again.
#: Rows of earlier layouts hold their bytes inline (`data`, with `blob` NULL); they are read as they are.
_DDL = """
CREATE TABLE IF NOT EXISTS nodes (
    path TEXT PRIMARY KEY, type TEXT NOT NULL, attrs TEXT NOT NULL, value TEXT
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS tablets (
    path TEXT NOT NULL, tablet INTEGER NOT NULL, total INTEGER NOT NULL, trimmed INTEGER NOT NULL,
    data_weight INTEGER NOT NULL DEFAULT 0, PRIMARY KEY (path, tablet)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS chunks (
    path TEXT NOT NULL, tablet INTEGER NOT NULL, first_row INTEGER NOT NULL, row_count INTEGER NOT NULL,
    data BLOB NOT NULL, blob INTEGER, PRIMARY KEY (path, tablet, first_row)
);
CREATE TABLE IF NOT EXISTS sorted_chunks (
    path TEXT NOT NULL, run INTEGER NOT NULL, piece INTEGER NOT NULL, row_count INTEGER NOT NULL,
    tombstones INTEGER NOT NULL, blob INTEGER NOT NULL, PRIMARY KEY (path, run, piece)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS static_chunks (
    path TEXT NOT NULL, seq INTEGER NOT NULL, data BLOB NOT NULL, row_count INTEGER, blob INTEGER,
    PRIMARY KEY (path, seq)
);
CREATE TABLE IF NOT EXISTS registrations (
    queue TEXT NOT NULL, consumer TEXT NOT NULL, vital INTEGER NOT NULL, partitions TEXT,
    PRIMARY KEY (queue, consumer)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS blobs (id INTEGER PRIMARY KEY, data BLOB NOT NULL);
"""
#: The table and column added last: a database without them (new, or of an earlier layout) gets the missing tables
#: and columns.
_NEWEST = ("tablets", "data_weight")
#: Columns that tables of earlier layouts lack (`ALTER TABLE ... ADD COLUMN` rewrites no row).
_ADDED_COLUMNS = {"chunks": ("blob INTEGER",), "static_chunks": ("row_count INTEGER", "blob INTEGER"),
                  "tablets": ("data_weight INTEGER NOT NULL DEFAULT 0",)}


class Store:
    """Per-thread SQLite connections to one database; safe to share between threads of a process.

    Picklable as the root path alone: a forked or unpickled copy opens its own connections.
    """

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root)
        self._local = threading.local()

    def __getstate__(self) -> dict[str, str]:
        return {"root": str(self.root)}

    def __setstate__(self, state: dict[str, str]) -> None:
        self.__init__(state["root"])

    def connection(self) -> sqlite3.Connection:
        """This thread's connection (autocommit mode: transactions are explicit)."""
        conn = getattr(self._local, "conn", None)
        if conn is None or self._local.pid != os.getpid():
            conn = self.open()
            self._local.conn, self._local.pid = conn, os.getpid()
        return conn

    def open(self) -> sqlite3.Connection:
        """A new connection with the schema in place."""
        self.root.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(self.root / DB_FILE, timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None,
                               check_same_thread=False)
        conn.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=NORMAL")
        if not conn.execute("SELECT 1 FROM pragma_table_info(?) WHERE name=?", _NEWEST).fetchone():
            with WriteTxn(conn):  # several processes may get here at once: each re-checks under the lock
                for statement in filter(str.strip, _DDL.split(";")):
                    conn.execute(statement)
                for sql_table, columns in _ADDED_COLUMNS.items():
                    present = {row[1] for row in conn.execute(f"PRAGMA table_info({sql_table})")}
                    for column in columns:
                        if column.split()[0] not in present:
                            conn.execute(f"ALTER TABLE {sql_table} ADD COLUMN {column}")
        return conn

    def close(self) -> None:
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
            self._local.conn = None


class WriteTxn:
    """`BEGIN IMMEDIATE` ... `COMMIT` on a connection; rollback on error. Nests by doing nothing."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn
        self.outer = False

    def __enter__(self) -> sqlite3.Connection:
        if not self.conn.in_transaction:
            self.conn.execute("BEGIN IMMEDIATE")
            self.outer = True
        return self.conn

    def __exit__(self, exc_type, exc, tb) -> None:
        if not self.outer:
            return
        if exc_type is None:
            self.conn.execute("COMMIT")
        else:
            self.conn.execute("ROLLBACK")


def encode_batch(batch: pa.RecordBatch | pa.Table) -> bytes:
    """Arrow IPC stream bytes of a batch or table."""
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, batch.schema) as writer:
        writer.write(batch)
    return sink.getvalue().to_pybytes()


@DECODE.timed
def decode_batch(data: bytes) -> pa.Table:
    return pa.ipc.open_stream(pa.py_buffer(data)).read_all()


def put_blob(conn: sqlite3.Connection, data: bytes) -> int:
    """Store one chunk's Arrow IPC bytes; returns the id that a chunk table's `blob` column names."""
    return conn.execute("INSERT INTO blobs (data) VALUES (?)", (data,)).lastrowid


def chunk_bytes(sql_table: str) -> str:
    """SQL for the bytes of a row of `sql_table`: the blob it names, else (earlier layouts) its inline `data`."""
    return f"coalesce((SELECT data FROM blobs WHERE blobs.id = {sql_table}.blob), {sql_table}.data)"


def chunk_source(sql_table: str) -> str:
    """SQL for where a row of `sql_table` keeps its bytes, for `read_chunk`: the blob it names, and (earlier layouts,
    no blob) its inline `data`."""
    return f"{sql_table}.blob, CASE WHEN {sql_table}.blob IS NULL THEN {sql_table}.data END"


def read_chunk(conn: sqlite3.Connection, blob: int | None, inline: bytes | None) -> bytes:
    """A chunk's bytes from what `chunk_source` selected, read inside the caller's read transaction: a blob straight
    from its pages (one copy, where a query's result column takes two: a queue's rows read with ~40% less CPU for the
    bytes), else the inline bytes."""
    if blob is None:
        return inline or b""
    with conn.blobopen("blobs", "data", blob, readonly=True) as stored:
        return stored.read()


def delete_chunks(conn: sqlite3.Connection, sql_table: str, where: str, args: tuple) -> None:
    """Delete the rows of a chunk table that `where` selects, and the blobs they name."""
    conn.execute(f"DELETE FROM blobs WHERE id IN (SELECT blob FROM {sql_table} WHERE {where})", args)
    conn.execute(f"DELETE FROM {sql_table} WHERE {where}", args)
