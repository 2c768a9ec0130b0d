"""`EmbeddedCluster`: the cluster interface on local disk (`local:///root`), the default backend.

Storage details live in `sqlite_store`; this module implements YTsaurus semantics on top of it: the
path tree, ordered tables with tablets and trimming, consumers (stored as rows of a sorted table with
the YT consumer schema), sorted and static tables, documents, and tablet transactions.
"""

from __future__ import annotations

import json
import pickle
import sqlite3
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

import pyarrow as pa

from ..base import (
    DEFAULT_CHUNK_BYTES,
    DEFAULT_CHUNK_ROWS,
    DOCUMENT,
    MAP_NODE,
    ORDERED,
    ROWS,
    SORTED,
    STATIC,
    TABLE,
    Cluster,
    Registration,
    TabletInfo,
    Transaction,
    table_kind,
)
from ..errors import (
    AlreadyExistsError,
    ClusterError,
    ConflictError,
    NoSuchPathError,
    NotRegisteredError,
    SchemaError,
    TrimmedRowsError,
)
from ..schema import CONSUMER_SCHEMA, ROW_INDEX, TABLET_INDEX, TIMESTAMP, TableSchema, to_arrow_table
from .arrow_chunks import rebatch, slices, split_by_tablet, tablet_targets
from .sqlite_store import Store, WriteTxn, decode_batch, encode_batch

#: Rows per stored Arrow chunk of a queue: bounds what one range read must decode beyond its range.
STORED_CHUNK_ROWS = 16_384
STORED_CHUNK_BYTES = 4 * 1024 * 1024


def normalize_path(path: str) -> str:
    """`//a/b` form without a trailing slash; `SchemaError`-free `ClusterError` for anything else."""
    if not isinstance(path, str) or not path.startswith("//"):
        raise ClusterError(f"path {path!r}: YT paths start with '//'")
    return path.rstrip("/") if path != "//" else path


def _split_attr(path: str) -> tuple[str, str | None]:
    if "/@" in path:
        node, attr = path.split("/@", 1)
        return normalize_path(node), attr
    return normalize_path(path), None


def _parent(path: str) -> str:
    parent = path.rsplit("/", 1)[0]
    return parent if parent != "/" else "//"


def _sort_key(values: Sequence[Any]) -> tuple:
    return tuple((v is not None, v) for v in values)


class EmbeddedCluster(Cluster):
    """YTsaurus semantics on one local SQLite database; see the module docstring."""

    name = "local"

    def __init__(self, root: str) -> None:
        self.root = root
        self.uri = "local://" + root
        self._store = Store(root)

    def __repr__(self) -> str:
        return f"EmbeddedCluster({self.root!r})"

    def __getstate__(self) -> dict[str, str]:
        return {"root": self.root}

    def __setstate__(self, state: dict[str, str]) -> None:
        self.__init__(state["root"])

    def close(self) -> None:
        self._store.close()

    @property
    def _conn(self) -> sqlite3.Connection:
        return self._store.connection()

    # -- path tree --------------------------------------------------------------------------------

    def _node(self, conn: sqlite3.Connection, path: str) -> tuple[str, dict[str, Any], Any]:
        if path == "//":
            return MAP_NODE, {"type": MAP_NODE}, None
        row = conn.execute("SELECT type, attrs, value FROM nodes WHERE path=?", (path,)).fetchone()
        if row is None:
            raise NoSuchPathError(f"{path}: no such node")
        return row[0], json.loads(row[1]), json.loads(row[2]) if row[2] is not None else None

    def exists(self, path: str) -> bool:
        node, attr = _split_attr(path)
        try:
            _, attrs, _ = self._node(self._conn, node)
        except NoSuchPathError:
            return False
        return attr is None or attr == "" or attr in attrs

    def create(self, node_type, path, *, recursive=False, ignore_existing=False, attributes=None) -> None:
        path = normalize_path(path)
        attrs = dict(attributes or {})
        value = attrs.pop("value", None)
        if node_type not in (MAP_NODE, TABLE, DOCUMENT):
            raise ClusterError(f"{path}: node type {node_type!r} is not supported (map_node, table, document)")
        if node_type == TABLE:
            attrs = self._table_attrs(path, attrs)
        attrs["type"] = node_type
        with WriteTxn(self._conn) as conn:
            if conn.execute("SELECT 1 FROM nodes WHERE path=?", (path,)).fetchone():
                if ignore_existing:
                    return
                raise AlreadyExistsError(f"{path}: node already exists")
            self._ensure_parent(conn, path, recursive)
            conn.execute("INSERT INTO nodes VALUES (?, ?, ?, ?)",
                         (path, node_type, json.dumps(attrs), json.dumps(value) if value is not None else None))
            for tablet in range(attrs.get("tablet_count", 0) if table_kind(attrs) == ORDERED else 0):
                conn.execute("INSERT INTO tablets VALUES (?, ?, 0, 0)", (path, tablet))

    @staticmethod
    def _table_attrs(path: str, attrs: dict[str, Any]) -> dict[str, Any]:
        if "schema" not in attrs:
            raise SchemaError(f"{path}: a table needs a 'schema' attribute")
        try:
            attrs["schema"] = TableSchema.from_yt(attrs["schema"]).to_yt()
        except SchemaError as e:
            raise SchemaError(f"{path}: {e}") from None
        attrs["dynamic"] = bool(attrs.get("dynamic", False))
        if table_kind({**attrs, "type": TABLE}) == ORDERED:
            count = attrs.setdefault("tablet_count", 1)
            if not isinstance(count, int) or count < 1:
                raise SchemaError(f"{path}: tablet_count must be a positive integer, got {count!r}")
        return attrs

    def _ensure_parent(self, conn: sqlite3.Connection, path: str, recursive: bool) -> None:
        parent = _parent(path)
        if parent == "//":
            return
        row = conn.execute("SELECT type FROM nodes WHERE path=?", (parent,)).fetchone()
        if row is None:
            if not recursive:
                raise NoSuchPathError(f"{path}: parent {parent} does not exist (use recursive=True)")
            self._ensure_parent(conn, parent, recursive)
            conn.execute("INSERT INTO nodes VALUES (?, ?, ?, NULL)", (parent, MAP_NODE, json.dumps({"type": MAP_NODE})))
        elif row[0] != MAP_NODE:
            raise ClusterError(f"{path}: parent {parent} is a {row[0]}, not a map_node")

    def remove(self, path: str, *, recursive: bool = False, force: bool = False) -> None:
        path = normalize_path(path)
        with WriteTxn(self._conn) as conn:
            if not conn.execute("SELECT 1 FROM nodes WHERE path=?", (path,)).fetchone():
                if force:
                    return
                raise NoSuchPathError(f"{path}: no such node")
            below = [r[0] for r in conn.execute(
                "SELECT path FROM nodes WHERE path > ? AND path < ?", (path + "/", path + "0"))]
            if below and not recursive:
                raise ClusterError(f"{path}: map node is not empty (use recursive=True)")
            for p in [path, *below]:
                for table in ("nodes", "tablets", "chunks", "sorted_rows", "static_chunks"):
                    conn.execute(f"DELETE FROM {table} WHERE path=?", (p,))
                conn.execute("DELETE FROM registrations WHERE queue=? OR consumer=?", (p, p))

    def list(self, path: str) -> list[str]:
        path = normalize_path(path)
        conn = self._conn
        node_type, _, _ = self._node(conn, path)
        if node_type != MAP_NODE:
            raise ClusterError(f"{path}: cannot list a {node_type}")
        prefix = path if path == "//" else path + "/"
        rows = conn.execute("SELECT path FROM nodes WHERE path > ? AND path < ?",
                            (prefix, prefix[:-1] + chr(ord(prefix[-1]) + 1)))
        return sorted(p[len(prefix):] for (p,) in rows if "/" not in p[len(prefix):])

    def get(self, path: str) -> Any:
        node, attr = _split_attr(path)
        node_type, attrs, value = self._node(self._conn, node)
        if attr is None:
            if node_type == DOCUMENT:
                return value
            if node_type == MAP_NODE:
                return {name: None for name in self.list(node)}
            raise ClusterError(f"{node}: get of a {node_type} returns nothing; read its rows instead")
        if node_type == TABLE:
            attrs = {**attrs, **self._table_counters(node, attrs)}
        if attr == "":
            return attrs
        if attr not in attrs:
            raise NoSuchPathError(f"{node}: no attribute {attr!r}")
        return attrs[attr]

    def _table_counters(self, path: str, attrs: dict[str, Any]) -> dict[str, Any]:
        conn = self._conn
        kind = table_kind(attrs)
        if kind == ORDERED:
            (rows,) = conn.execute("SELECT coalesce(sum(total - trimmed), 0) FROM tablets WHERE path=?",
                                   (path,)).fetchone()
        elif kind == SORTED:
            (rows,) = conn.execute("SELECT count(*) FROM sorted_rows WHERE path=?", (path,)).fetchone()
        else:
            rows = sum(decode_batch(d).num_rows for (d,) in conn.execute(
                "SELECT data FROM static_chunks WHERE path=?", (path,)))
        return {"row_count": rows, "path": path}

    def set(self, path: str, value: Any) -> None:
        node, attr = _split_attr(path)
        encoded = json.dumps(value)
        with WriteTxn(self._conn) as conn:
            node_type, attrs, _ = self._node(conn, node)
            if attr is None:
                if node_type != DOCUMENT:
                    raise ClusterError(f"{node}: only documents have a value to set; this is a {node_type}")
                conn.execute("UPDATE nodes SET value=? WHERE path=?", (encoded, node))
                return
            if attr in ("type", "schema", "dynamic", "tablet_count"):
                raise ClusterError(f"{node}: attribute {attr!r} is read-only here")
            attrs[attr] = value
            conn.execute("UPDATE nodes SET attrs=? WHERE path=?", (json.dumps(attrs), node))

    # -- tables: common -----------------------------------------------------------------------------

    def _table(self, conn: sqlite3.Connection, path: str, *kinds: str) -> tuple[str, TableSchema, dict]:
        path = normalize_path(path)
        node_type, attrs, _ = self._node(conn, path)
        kind = table_kind(attrs)
        if kind not in kinds:
            raise SchemaError(f"{path}: expected {' or '.join(kinds)} table, found {kind or node_type}")
        return kind, TableSchema.from_yt(attrs["schema"]), attrs

    def insert_rows(self, path: str, rows: ROWS, *, tablet_index: int | None = None) -> None:
        with WriteTxn(self._conn) as conn:
            _insert(self, conn, normalize_path(path), rows, tablet_index)

    # -- ordered tables -------------------------------------------------------------------------------

    def _append(self, conn: sqlite3.Connection, path: str, schema: TableSchema, attrs: dict, rows: ROWS,
                tablet_index: int | None) -> None:
        tablets = tablet_targets(rows, path, attrs["tablet_count"], tablet_index)
        table = to_arrow_table(schema, rows, path)
        if TIMESTAMP in schema.names:
            idx = schema.names.index(TIMESTAMP)
            table = table.set_column(idx, TIMESTAMP, pa.array([time.time_ns() // 1000] * table.num_rows,
                                                              table.schema.field(idx).type))
        for tablet, part in split_by_tablet(table, tablets, attrs["tablet_count"]):
            (total,) = conn.execute("SELECT total FROM tablets WHERE path=? AND tablet=?",
                                    (path, tablet)).fetchone()
            for piece in slices(part, STORED_CHUNK_ROWS, STORED_CHUNK_BYTES):
                conn.execute("INSERT INTO chunks VALUES (?, ?, ?, ?, ?)",
                             (path, tablet, total, piece.num_rows, encode_batch(piece)))
                total += piece.num_rows
            conn.execute("UPDATE tablets SET total=? WHERE path=? AND tablet=?", (total, path, tablet))

    def get_tablet_infos(self, path: str) -> list[TabletInfo]:
        conn = self._conn
        self._table(conn, path, ORDERED)
        return [TabletInfo(t, total, trimmed) for t, total, trimmed in conn.execute(
            "SELECT tablet, total, trimmed FROM tablets WHERE path=? ORDER BY tablet", (normalize_path(path),))]

    def read_tablet(self, path, tablet_index, lower, upper, *, columns=None, max_rows=DEFAULT_CHUNK_ROWS,
                    max_bytes=DEFAULT_CHUNK_BYTES, service_columns=False) -> Iterator[pa.RecordBatch]:
        path = normalize_path(path)
        conn = self._store.open()  # own connection: a generator may outlive this thread's other work
        try:
            conn.execute("BEGIN")  # one snapshot for the whole range
            _, schema, attrs = self._table(conn, path, ORDERED)
            _check_range(conn, path, tablet_index, lower, upper, attrs["tablet_count"])
            wanted = list(columns) if columns is not None else schema.names
            missing = sorted(set(wanted) - set(schema.names))
            if missing:
                raise SchemaError(f"{path}: no columns {missing} in schema {schema.names}")
            pieces = _range_pieces(conn, path, tablet_index, lower, upper, wanted, service_columns)
            yield from rebatch(pieces, max_rows, max_bytes)
        finally:
            conn.close()

    def trim_rows(self, path: str, tablet_index: int, trimmed_row_count: int) -> None:
        path = normalize_path(path)
        with WriteTxn(self._conn) as conn:
            _, _, attrs = self._table(conn, path, ORDERED)
            total, trimmed = _tablet_counters(conn, path, tablet_index, attrs["tablet_count"])
            if trimmed_row_count > total:
                raise ClusterError(f"{path}: cannot trim tablet {tablet_index} to {trimmed_row_count}: "
                                   f"it has only {total} rows")
            new = max(trimmed, trimmed_row_count)
            conn.execute("UPDATE tablets SET trimmed=? WHERE path=? AND tablet=?", (new, path, tablet_index))
            conn.execute("DELETE FROM chunks WHERE path=? AND tablet=? AND first_row + row_count <= ?",
                         (path, tablet_index, new))

    # -- consumers --------------------------------------------------------------------------------

    def create_consumer(self, path: str, *, recursive: bool = False, ignore_existing: bool = False) -> None:
        self.create(TABLE, path, recursive=recursive, ignore_existing=ignore_existing,
                    attributes={"dynamic": True, "schema": CONSUMER_SCHEMA, "treat_as_queue_consumer": True})

    def _require_consumer(self, conn: sqlite3.Connection, path: str) -> None:
        _, _, attrs = self._table(conn, path, SORTED)
        if not attrs.get("treat_as_queue_consumer"):
            raise SchemaError(f"{path}: not a consumer (a sorted table without treat_as_queue_consumer)")

    def register_queue_consumer(self, queue_path, consumer_path, *, vital=False, partitions=None) -> None:
        queue_path, consumer_path = normalize_path(queue_path), normalize_path(consumer_path)
        with WriteTxn(self._conn) as conn:
            self._table(conn, queue_path, ORDERED)
            self._require_consumer(conn, consumer_path)
            conn.execute("INSERT OR REPLACE INTO registrations VALUES (?, ?, ?, ?)",
                         (queue_path, consumer_path, int(vital),
                          json.dumps(list(partitions)) if partitions is not None else None))

    def unregister_queue_consumer(self, queue_path: str, consumer_path: str) -> None:
        with WriteTxn(self._conn) as conn:
            cur = conn.execute("DELETE FROM registrations WHERE queue=? AND consumer=?",
                               (normalize_path(queue_path), normalize_path(consumer_path)))
            if cur.rowcount == 0:
                raise NotRegisteredError(f"consumer {consumer_path} is not registered for queue {queue_path}")

    def list_queue_consumer_registrations(self, queue_path=None, consumer_path=None) -> list[Registration]:
        sql, args = "SELECT queue, consumer, vital, partitions FROM registrations WHERE 1=1", []
        for column, value in (("queue", queue_path), ("consumer", consumer_path)):
            if value is not None:
                sql += f" AND {column}=?"
                args.append(normalize_path(value))
        return [Registration(q, c, bool(v), tuple(json.loads(p)) if p else None)
                for q, c, v, p in self._conn.execute(sql + " ORDER BY queue, consumer", args)]

    def _require_registration(self, conn: sqlite3.Connection, consumer: str, queue: str) -> None:
        if not conn.execute("SELECT 1 FROM registrations WHERE queue=? AND consumer=?",
                            (queue, consumer)).fetchone():
            raise NotRegisteredError(f"consumer {consumer} is not registered for queue {queue} "
                                     f"(register it: opsd consumer register {queue} {consumer})")

    def get_consumer_offsets(self, consumer_path: str, queue_path: str) -> dict[int, int]:
        consumer_path, queue_path = normalize_path(consumer_path), normalize_path(queue_path)
        conn = self._conn
        self._require_consumer(conn, consumer_path)
        offsets = {}
        for (blob,) in conn.execute("SELECT row FROM sorted_rows WHERE path=?", (consumer_path,)):
            row = pickle.loads(blob)
            if row["queue_path"] == queue_path and row["queue_cluster"] == self.name:
                offsets[row["partition_index"]] = row["offset"]
        return offsets

    def pull_consumer(self, consumer_path, queue_path, offset, partition_index, *, max_row_count=1000,
                      max_data_weight=16 * 1024 * 1024) -> pa.Table:
        consumer_path, queue_path = normalize_path(consumer_path), normalize_path(queue_path)
        conn = self._conn
        self._require_registration(conn, consumer_path, queue_path)
        if offset is None:
            offset = self.get_consumer_offsets(consumer_path, queue_path).get(partition_index, 0)
        total, trimmed = _tablet_counters(conn, queue_path, partition_index,
                                          self._table(conn, queue_path, ORDERED)[2]["tablet_count"])
        lower = min(max(offset, trimmed), total)  # past the end: nothing to read yet, as in YTsaurus
        upper = min(total, lower + max_row_count)
        batches = list(self.read_tablet(queue_path, partition_index, lower, upper, max_rows=max_row_count,
                                        max_bytes=max_data_weight, service_columns=True))
        if not batches:
            schema = self._table(conn, queue_path, ORDERED)[1].arrow_schema()
            return pa.table({TABLET_INDEX: pa.array([], pa.int64()), ROW_INDEX: pa.array([], pa.int64()),
                             **{f.name: pa.array([], f.type) for f in schema}})
        return pa.Table.from_batches(batches[:1])  # one bounded answer, as YTsaurus gives

    def advance_consumer(self, consumer_path, queue_path, partition_index, old_offset, new_offset) -> None:
        with WriteTxn(self._conn) as conn:
            _advance(self, conn, consumer_path, queue_path, partition_index, old_offset, new_offset)

    # -- sorted tables, static tables -----------------------------------------------------------------

    def delete_rows(self, path: str, keys: Iterable[Mapping[str, Any]]) -> None:
        with WriteTxn(self._conn) as conn:
            _delete(self, conn, normalize_path(path), keys)

    def lookup_rows(self, path: str, keys: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
        return _lookup(self, self._conn, normalize_path(path), keys)

    def select_rows(self, path: str) -> list[dict[str, Any]]:
        path = normalize_path(path)
        conn = self._conn
        _, schema, _ = self._table(conn, path, SORTED)
        rows = [pickle.loads(b) for (b,) in conn.execute("SELECT row FROM sorted_rows WHERE path=?", (path,))]
        keys = schema.key_columns
        return sorted(rows, key=lambda r: _sort_key([r[k] for k in keys]))

    def write_table(self, path: str, rows: ROWS, *, append: bool = False) -> None:
        path = normalize_path(path)
        with WriteTxn(self._conn) as conn:
            _, schema, _ = self._table(conn, path, STATIC)
            table = to_arrow_table(schema, rows, path)
            if not append:
                conn.execute("DELETE FROM static_chunks WHERE path=?", (path,))
            (seq,) = conn.execute("SELECT coalesce(max(seq), -1) + 1 FROM static_chunks WHERE path=?",
                                  (path,)).fetchone()
            for i, piece in enumerate(slices(table, STORED_CHUNK_ROWS, STORED_CHUNK_BYTES)):
                conn.execute("INSERT INTO static_chunks VALUES (?, ?, ?)", (path, seq + i, encode_batch(piece)))

    def read_table(self, path: str, *, max_rows: int = DEFAULT_CHUNK_ROWS) -> Iterator[pa.RecordBatch]:
        path = normalize_path(path)
        conn = self._conn
        kind, schema, _ = self._table(conn, path, STATIC, SORTED)
        if kind == SORTED:
            table = pa.Table.from_pylist(self.select_rows(path), schema=schema.arrow_schema())
            yield from table.to_batches(max_chunksize=max_rows)
            return
        blobs = [d for (d,) in conn.execute("SELECT data FROM static_chunks WHERE path=? ORDER BY seq", (path,))]
        pieces = (b for d in blobs for b in decode_batch(d).to_batches())
        yield from rebatch(pieces, max_rows, DEFAULT_CHUNK_BYTES)

    # -- transactions -----------------------------------------------------------------------------

    def transaction(self) -> Transaction:
        return EmbeddedTransaction(self)


class EmbeddedTransaction(Transaction):
    """A SQLite write transaction on a connection of its own; commit is atomic, a crash leaves nothing."""

    def __init__(self, cluster: EmbeddedCluster) -> None:
        self._cluster = cluster
        self._conn = cluster._store.open()
        self._conn.execute("BEGIN IMMEDIATE")

    def insert_rows(self, path, rows, *, tablet_index=None) -> None:
        _insert(self._cluster, self._conn, normalize_path(path), rows, tablet_index)

    def delete_rows(self, path, keys) -> None:
        _delete(self._cluster, self._conn, normalize_path(path), keys)

    def lookup_rows(self, path, keys) -> list[dict[str, Any]]:
        return _lookup(self._cluster, self._conn, normalize_path(path), keys)

    def advance_consumer(self, consumer_path, queue_path, partition_index, old_offset, new_offset) -> None:
        _advance(self._cluster, self._conn, consumer_path, queue_path, partition_index, old_offset, new_offset)

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


# -- operations shared by plain calls and transactions (all take the connection to run on) -----------


def _insert(cluster: EmbeddedCluster, conn: sqlite3.Connection, path: str, rows: ROWS,
            tablet_index: int | None) -> None:
    kind, schema, attrs = cluster._table(conn, path, ORDERED, SORTED)
    if not isinstance(rows, pa.Table | pa.RecordBatch | list):
        rows = list(rows)
    if kind == ORDERED:
        cluster._append(conn, path, schema, attrs, rows, tablet_index)
        return
    table = to_arrow_table(schema, rows, path)
    keys = schema.key_columns
    conn.executemany("INSERT OR REPLACE INTO sorted_rows VALUES (?, ?, ?)",
                     [(path, _key_text(row, keys, path), pickle.dumps(row)) for row in table.to_pylist()])


#: Sorted-table keys as JSON text (one encoder: `json.dumps(default=...)` builds a new one per call).
_KEY_ENCODER = json.JSONEncoder(default=str)


def _key_text(row: Mapping[str, Any], keys: Sequence[str], path: str) -> str:
    missing = [k for k in keys if k not in row]
    if missing:
        raise SchemaError(f"{path}: key columns {missing} missing in {dict(row)!r}")
    return _KEY_ENCODER.encode([row[k] for k in keys])


def _delete(cluster: EmbeddedCluster, conn: sqlite3.Connection, path: str, keys: Iterable[Mapping]) -> None:
    _, schema, _ = cluster._table(conn, path, SORTED)
    for key in keys:
        conn.execute("DELETE FROM sorted_rows WHERE path=? AND key=?",
                     (path, _key_text(key, schema.key_columns, path)))


def _lookup(cluster: EmbeddedCluster, conn: sqlite3.Connection, path: str, keys: Iterable[Mapping]) -> list:
    _, schema, _ = cluster._table(conn, path, SORTED)
    found = []
    for key in keys:
        row = conn.execute("SELECT row FROM sorted_rows WHERE path=? AND key=?",
                           (path, _key_text(key, schema.key_columns, path))).fetchone()
        if row is not None:
            found.append(pickle.loads(row[0]))
    return found


def _advance(cluster: EmbeddedCluster, conn: sqlite3.Connection, consumer_path: str, queue_path: str,
             partition_index: int, old_offset: int | None, new_offset: int) -> None:
    consumer_path, queue_path = normalize_path(consumer_path), normalize_path(queue_path)
    cluster._require_consumer(conn, consumer_path)
    cluster._require_registration(conn, consumer_path, queue_path)
    _, _, attrs = cluster._table(conn, queue_path, ORDERED)
    if not 0 <= partition_index < attrs["tablet_count"]:
        raise ClusterError(f"{queue_path}: no partition {partition_index} "
                           f"(the queue has {attrs['tablet_count']} partitions)")
    if new_offset < 0:
        raise ClusterError(f"{consumer_path}: offset must not be negative, got {new_offset}")
    key = {"queue_cluster": cluster.name, "queue_path": queue_path, "partition_index": partition_index}
    current = _lookup(cluster, conn, consumer_path, [key])
    stored = current[0]["offset"] if current else 0
    if old_offset is not None and stored != old_offset:
        raise ConflictError(f"{consumer_path}: offset of {queue_path} partition {partition_index} is {stored}, "
                            f"not the expected old_offset {old_offset}")
    row = {**key, "offset": new_offset, "meta": current[0]["meta"] if current else None}
    conn.execute("INSERT OR REPLACE INTO sorted_rows VALUES (?, ?, ?)",
                 (consumer_path, json.dumps([cluster.name, queue_path, partition_index]), pickle.dumps(row)))


def _tablet_counters(conn: sqlite3.Connection, path: str, tablet: int, tablet_count: int) -> tuple[int, int]:
    if not isinstance(tablet, int) or not 0 <= tablet < tablet_count:
        raise ClusterError(f"{path}: no tablet {tablet!r} (the table has {tablet_count} tablets)")
    return conn.execute("SELECT total, trimmed FROM tablets WHERE path=? AND tablet=?", (path, tablet)).fetchone()


def _check_range(conn: sqlite3.Connection, path: str, tablet: int, lower: int, upper: int, count: int) -> None:
    total, trimmed = _tablet_counters(conn, path, tablet, count)
    if lower > upper or upper > total:
        raise ClusterError(f"{path}: tablet {tablet} has rows [{trimmed}, {total}); cannot read [{lower}, {upper})")
    if lower < trimmed and lower < upper:
        raise TrimmedRowsError(f"{path}: partition {tablet}, rows [{lower}, {min(trimmed, upper)}) of the requested "
                               f"range [{lower}, {upper}) were trimmed before they were read")


def _range_pieces(conn: sqlite3.Connection, path: str, tablet: int, lower: int, upper: int,
                  columns: list[str], service_columns: bool) -> Iterator[pa.RecordBatch]:
    if lower >= upper:
        return
    (start,) = conn.execute("SELECT coalesce(max(first_row), 0) FROM chunks WHERE path=? AND tablet=? "
                            "AND first_row <= ?", (path, tablet, lower)).fetchone()
    cursor = conn.execute("SELECT first_row, row_count, data FROM chunks WHERE path=? AND tablet=? "
                          "AND first_row >= ? AND first_row < ? ORDER BY first_row", (path, tablet, start, upper))
    for first, count, data in cursor:
        lo, hi = max(lower, first), min(upper, first + count)
        if lo >= hi:
            continue
        table = decode_batch(data).select(columns).slice(lo - first, hi - lo)
        if service_columns:
            table = table.add_column(0, ROW_INDEX, pa.array(range(lo, hi), pa.int64()))
            table = table.add_column(0, TABLET_INDEX, pa.array([tablet] * (hi - lo), pa.int64()))
        yield from table.to_batches()
