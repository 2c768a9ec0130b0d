"""Read a query's history back: its entries newest first (`opsd history`), and the ids the bound counts
(`apply`). A query whose table does not exist yet has no history."""

from __future__ import annotations

from opsd.results.history import HistoryEntry
from opsd.stores.history.table import from_row
from streaming_core.cluster import Cluster


def _rows(cluster: Cluster, path: str, query: str) -> list[dict]:
    if not cluster.exists(path):
        return []
    return [r for r in cluster.select_rows(path) if r.get("query") == query]


def read_ids(cluster: Cluster, path: str, query: str) -> list[int]:
    """The ids of the query's rows, oldest first."""
    return sorted(int(r["id"]) for r in _rows(cluster, path, query))


def read_history(cluster: Cluster, path: str, query: str, limit: int | None = None) -> list[HistoryEntry]:
    """The query's entries, newest first (at most `limit`)."""
    rows = sorted(_rows(cluster, path, query), key=lambda r: r["id"], reverse=True)
    return [from_row(r, path) for r in rows[:limit]]
