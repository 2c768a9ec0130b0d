"""Node lookups that every role of the embedded cluster shares: YT path forms, a node's stored record and a tablet's
row counters.

The `nodes` SQL table (path, type, attributes as JSON, a document's value as JSON) is written only by
`tree`; the other roles read it through `node` and `table`.
"""

from __future__ import annotations

import json
import sqlite3
from typing import Any

from ..base import MAP_NODE, table_kind
from ..errors import ClusterError, NoSuchPathError, SchemaError
from ..schema import TableSchema


def normalize_path(path: str) -> str:
    """`//a/b` form without a trailing slash; `SchemaError`-free `ClusterError` for anything else."""
    if not isinstance(path, str) or not path.startswith("//"):
        raise ClusterError(f"path {path!r}: YT paths start with '//'")
    return path.rstrip("/") if path != "//" else path


def split_attr(path: str) -> tuple[str, str | None]:
    """`//a/b/@attr` as (`//a/b`, `attr`); a path without `/@` as (path, None)."""
    if "/@" in path:
        node_path, attr = path.split("/@", 1)
        return normalize_path(node_path), attr
    return normalize_path(path), None


def parent(path: str) -> str:
    """The parent of a normalized path (`//` for a top-level node)."""
    up = path.rsplit("/", 1)[0]
    return up if up != "/" else "//"


def node(conn: sqlite3.Connection, path: str) -> tuple[str, dict[str, Any], Any]:
    """Type, attributes and value of the node at a normalized path; `NoSuchPathError` if there is none."""
    if path == "//":
        return MAP_NODE, {"type": MAP_NODE}, None
    row = conn.execute("SELECT type, attrs, value FROM nodes WHERE path=?", (path,)).fetchone()
    if row is None:
        raise NoSuchPathError(f"{path}: no such node")
    return row[0], json.loads(row[1]), json.loads(row[2]) if row[2] is not None else None


def table(conn: sqlite3.Connection, path: str, *kinds: str) -> tuple[str, TableSchema, dict]:
    """Kind, schema and attributes of a table of one of `kinds`; `SchemaError` for any other node."""
    path = normalize_path(path)
    node_type, attrs, _ = node(conn, path)
    kind = table_kind(attrs)
    if kind not in kinds:
        raise SchemaError(f"{path}: expected {' or '.join(kinds)} table, found {kind or node_type}")
    return kind, TableSchema.from_yt(attrs["schema"]), attrs


def with_attribute(conn: sqlite3.Connection, attr: str) -> list[tuple[str, Any]]:
    """(path, value) of every node that has attribute `attr`, in path order."""
    found = []
    for path, attrs in conn.execute("SELECT path, attrs FROM nodes WHERE attrs LIKE ? ORDER BY path",
                                    (f'%"{attr}"%',)):
        value = json.loads(attrs).get(attr)
        if value is not None:
            found.append((path, value))
    return found


def tablet_counters(conn: sqlite3.Connection, path: str, tablet: int, tablet_count: int) -> tuple[int, int]:
    """(total, trimmed) of one tablet; `ClusterError` for a tablet the table does not have."""
    if not isinstance(tablet, int) or not 0 <= tablet < tablet_count:
        raise ClusterError(f"{path}: no tablet {tablet!r} (the table has {tablet_count} tablets)")
    return conn.execute("SELECT total, trimmed FROM tablets WHERE path=? AND tablet=?", (path, tablet)).fetchone()
