"""The path tree of the embedded cluster: map nodes, tables and documents, their attributes and values.

Nodes are rows of the `nodes` SQL table (see `nodes`). Creating a table or removing a subtree also sets
up or drops what the other roles store for it, through their own modules.
"""

from __future__ import annotations

import json
import sqlite3
from typing import Any

from ..base import DOCUMENT, MAP_NODE, MAX_TABLET_COUNT, ORDERED, SORTED, STATIC, TABLE, NodeInfo, table_kind
from ..errors import AlreadyExistsError, ClusterError, NoSuchPathError, SchemaError
from ..schema import TableSchema
from . import consumers, queues, sorted_store, tables
from .nodes import node, normalize_path, parent, split_attr
from .sqlite_store import WriteTxn


class TreeMixin:
    """`exists`, `create`, `remove`, `move`, `list`, `get` and `set` of `EmbeddedCluster`."""

    _conn: sqlite3.Connection

    def exists(self, path: str) -> bool:
        node_path, attr = split_attr(path)
        try:
            _, attrs, _ = node(self._conn, node_path)
        except NoSuchPathError:
            return False
        return attr is None or attr == "" or attr in attrs

    def create(self, node_type, path, *, recursive=False, ignore_existing=False, attributes=None) -> None:
        path = normalize_path(path)
        if path == "//":
            raise ClusterError("//: the root exists already; name a node below it, e.g. //home/app/queue")
        attrs = dict(attributes or {})
        value = attrs.pop("value", None)
        if node_type not in (MAP_NODE, TABLE, DOCUMENT):
            raise ClusterError(f"{path}: node type {node_type!r} is not supported (map_node, table, document)")
        if node_type == TABLE:
            attrs = _table_attrs(path, attrs)
        attrs["type"] = node_type
        with WriteTxn(self._conn) as conn:
            if conn.execute("SELECT 1 FROM nodes WHERE path=?", (path,)).fetchone():
                if ignore_existing:
                    return
                raise AlreadyExistsError(f"{path}: node already exists")
            _ensure_parent(conn, path, recursive)
            conn.execute("INSERT INTO nodes VALUES (?, ?, ?, ?)",
                         (path, node_type, json.dumps(attrs), json.dumps(value) if value is not None else None))
            if table_kind(attrs) == ORDERED:
                queues.create_tablets(conn, path, attrs.get("tablet_count", 0))

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
                conn.execute("DELETE FROM nodes WHERE path=?", (p,))
                for drop in (queues.drop, sorted_store.drop, tables.drop_static, consumers.drop_registrations):
                    drop(conn, p)

    def _reshard(self, path: str, tablet_count: int) -> None:
        """`Cluster.reshard`: the tablets (`queues.reshard_tablets`) and the `tablet_count` attribute in one write
        transaction, so readers and writers see the old tablets or the new ones (no unmount is needed here)."""
        path = normalize_path(path)
        with WriteTxn(self._conn) as conn:
            node_type, attrs, _ = node(conn, path)
            if table_kind(attrs) != ORDERED:
                raise SchemaError(f"{path}: expected {ORDERED} table, found {table_kind(attrs) or node_type}")
            queues.reshard_tablets(conn, path, attrs["tablet_count"], tablet_count)
            attrs["tablet_count"] = tablet_count
            conn.execute("UPDATE nodes SET attrs=? WHERE path=?", (json.dumps(attrs), path))

    def node_info(self, path: str) -> NodeInfo:
        """From the stored attributes alone: callers branch on type, kind and schema, never on the computed
        `row_count`, which costs a sorted table a merge of all its runs (`get(path + "/@row_count")` has it)."""
        node_path, _ = split_attr(path)
        node_type, attrs, _ = node(self._conn, node_path)
        return NodeInfo(path=path, type=node_type, kind=table_kind(attrs), attributes={**attrs, "path": node_path})

    def move(self, source: str, destination: str, *, force: bool = False) -> None:
        source, destination = normalize_path(source), normalize_path(destination)
        with WriteTxn(self._conn) as conn:
            node_type, attrs, _ = node(conn, source)
            if table_kind(attrs) != STATIC:
                raise ClusterError(f"{source}: the embedded cluster moves static tables only, found "
                                   f"{table_kind(attrs) or node_type}")
            if conn.execute("SELECT 1 FROM nodes WHERE path=?", (destination,)).fetchone():
                if not force:
                    raise AlreadyExistsError(f"{destination}: node already exists (move with force=True to replace it)")
                self.remove(destination, recursive=True)
            _ensure_parent(conn, destination, recursive=False)
            conn.execute("UPDATE nodes SET path=? WHERE path=?", (destination, source))
            tables.move_static(conn, source, destination)

    def list(self, path: str) -> list[str]:
        path = normalize_path(path)
        conn = self._conn
        node_type, _, _ = node(conn, path)
        if node_type != MAP_NODE:
            raise ClusterError(f"{path}: cannot list a {node_type}")
        prefix = path if path == "//" else path + "/"
        rows = conn.execute("SELECT path FROM nodes WHERE path > ? AND path < ?",
                            (prefix, prefix[:-1] + chr(ord(prefix[-1]) + 1)))
        return sorted(p[len(prefix):] for (p,) in rows if "/" not in p[len(prefix):])

    def get(self, path: str) -> Any:
        node_path, attr = split_attr(path)
        node_type, attrs, value = node(self._conn, node_path)
        if attr is None:
            if node_type == DOCUMENT:
                return value
            if node_type == MAP_NODE:
                return {name: None for name in self.list(node_path)}
            raise ClusterError(f"{node_path}: get of a {node_type} returns nothing; read its rows instead")
        if node_type == TABLE:
            attrs = {**attrs, "row_count": _row_count(self._conn, node_path, attrs), "path": node_path}
        if attr == "":
            return attrs
        value: Any = attrs
        for key in attr.split("/"):  # `@auto_trim_config/retained_rows`: a key inside a map attribute
            if not isinstance(value, dict) or key not in value:
                raise NoSuchPathError(f"{node_path}: no attribute {attr!r}")
            value = value[key]
        return value

    def set(self, path: str, value: Any) -> None:
        node_path, attr = split_attr(path)
        encoded = json.dumps(value)
        with WriteTxn(self._conn) as conn:
            node_type, attrs, _ = node(conn, node_path)
            if attr is None:
                if node_type != DOCUMENT:
                    raise ClusterError(f"{node_path}: only documents have a value to set; this is a {node_type}")
                conn.execute("UPDATE nodes SET value=? WHERE path=?", (encoded, node_path))
                return
            top, *inner = attr.split("/")
            if top in ("type", "schema", "dynamic", "tablet_count"):
                raise ClusterError(f"{node_path}: attribute {top!r} is read-only here")
            _set_inner(node_path, attrs, [top, *inner], value)
            conn.execute("UPDATE nodes SET attrs=? WHERE path=?", (json.dumps(attrs), node_path))


def _set_inner(node_path: str, attrs: dict[str, Any], keys: list[str], value: Any) -> None:
    """Set `attrs[k1][k2]... = value`; each map on the way must exist (YTsaurus': `set //t/@a/b` needs `@a`)."""
    holder = attrs
    for depth, key in enumerate(keys[:-1]):
        holder = holder.get(key)
        if not isinstance(holder, dict):
            raise NoSuchPathError(f"{node_path}: no attribute {'/'.join(keys[:depth + 1])!r} to set a key of")
    holder[keys[-1]] = value


def _table_attrs(path: str, attrs: dict[str, Any]) -> dict[str, Any]:
    """A new table's attributes checked and completed: canonical schema, `dynamic`, `tablet_count`."""
    if "schema" not in attrs:
        raise SchemaError(f"{path}: a table needs a 'schema' attribute")
    try:
        attrs["schema"] = TableSchema.from_yt(attrs["schema"]).to_yt()
    except SchemaError as e:
        raise SchemaError(f"{path}: {e}") from None
    attrs["dynamic"] = bool(attrs.get("dynamic", False))
    if table_kind({**attrs, "type": TABLE}) == ORDERED:
        count = attrs.setdefault("tablet_count", 1)
        if not isinstance(count, int) or isinstance(count, bool) or not 1 <= count <= MAX_TABLET_COUNT:
            raise SchemaError(f"{path}: tablet_count must be an integer from 1 to {MAX_TABLET_COUNT} (YTsaurus' "
                              f"limit), got {count!r}")
    return attrs


def _ensure_parent(conn: sqlite3.Connection, path: str, recursive: bool) -> None:
    up = parent(path)
    if up == "//":
        return
    row = conn.execute("SELECT type FROM nodes WHERE path=?", (up,)).fetchone()
    if row is None:
        if not recursive:
            raise NoSuchPathError(f"{path}: parent {up} does not exist (use recursive=True)")
        _ensure_parent(conn, up, recursive)
        conn.execute("INSERT INTO nodes VALUES (?, ?, ?, NULL)", (up, MAP_NODE, json.dumps({"type": MAP_NODE})))
    elif row[0] != MAP_NODE:
        raise ClusterError(f"{path}: parent {up} is a {row[0]}, not a map_node")


def _row_count(conn: sqlite3.Connection, path: str, attrs: dict[str, Any]) -> int:
    """`@row_count` of a table, from the storage of its kind."""
    kind = table_kind(attrs)
    if kind == ORDERED:
        return queues.row_count(conn, path)
    if kind == SORTED:
        return sorted_store.row_count(conn, path, TableSchema.from_yt(attrs["schema"]))
    return tables.static_row_count(conn, path)
