"""Append kept decisions to the history table (creating it), and keep it bounded: at most `rows_per_query` rows per
query (`checks.history_rows_per_query`), the oldest deleted as it grows.

The only step of the history that writes to the cluster. Appending never harms the job: a failed append is logged
(`history_append_failed`) and counted (`opsd_history_append_failures_total`), never raised; its entries are tried
again when the same decision comes again (`decide.novel` still sees them as new).
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence

import structlog

from opsd.collect.positions import error_text
from opsd.observe.recorder import Recorder
from opsd.results.history import HistoryEntry
from opsd.stores.history.collect import read_ids
from opsd.stores.history.decide import HistoryMemory, novel, remember
from opsd.stores.history.table import HISTORY_SCHEMA, key, to_row
from streaming_core.cluster import Cluster
from streaming_core.cluster.base import TABLE

log = structlog.get_logger(__name__)


class HistoryLog:
    """The history of the queries in `paths` (`{query: its history table}`; a query not in it keeps none), counted
    through `recorder` (None: only logged, as for `opsd desync heal`).

    Notes
    -----
    Thread-safe: the checks that decide run on the scheduler's threads and the runner's. It remembers, per query,
    the ids in its table (read once, then kept up to date) and the last entry kept per subject; a restart reads the
    ids again, so the bound holds across restarts.
    """

    def __init__(self, paths: Mapping[str, str], recorder: Recorder | None, rows_per_query: int) -> None:
        self.paths = dict(paths)
        self.recorder = recorder
        self.rows_per_query = rows_per_query
        self._memory = HistoryMemory()
        self._ids: dict[tuple[str, str], list[int]] = {}
        self._created: set[str] = set()
        self._lock = threading.Lock()

    def record(self, cluster: Cluster, entries: Sequence[HistoryEntry]) -> list[HistoryEntry]:
        """Append the entries that are new (`decide.novel`); returns those appended. Never raises."""
        done: list[HistoryEntry] = []
        with self._lock:
            by_query: dict[str, list[HistoryEntry]] = {}
            for e in novel([e for e in entries if e.query in self.paths], self._memory):
                by_query.setdefault(e.query, []).append(e)
            for query, kept in by_query.items():
                path = self.paths[query]
                try:
                    self._append(cluster, path, query, kept)
                except Exception as e:  # the history never harms the job: logged and counted
                    log.warning("history_append_failed", query=query, path=path, entries=len(kept),
                                error=error_text(e))
                    self._count(query, appended=0, failed=len(kept))
                    continue
                self._memory = remember(self._memory, kept)
                self._count(query, appended=len(kept), failed=0)
                done += kept
        return done

    def _count(self, query: str, *, appended: int, failed: int) -> None:
        if self.recorder is not None:
            self.recorder.record_history_append(query, appended=appended, failed=failed)

    def _append(self, cluster: Cluster, path: str, query: str, entries: Sequence[HistoryEntry]) -> None:
        if path not in self._created:
            cluster.create(TABLE, path, recursive=True, ignore_existing=True,
                           attributes={"dynamic": True, "schema": HISTORY_SCHEMA})
            self._created.add(path)
        ids = self._ids.get((path, query))
        if ids is None:
            ids = read_ids(cluster, path, query)
        rows = []
        for entry in entries:
            entry_id = max(int(entry.at * 1_000_000), ids[-1] + 1 if ids else 0)
            rows.append(to_row(entry, entry_id))
            ids = [*ids, entry_id]
        cluster.insert_rows(path, rows)
        over = len(ids) - self.rows_per_query
        if over > 0:
            cluster.delete_rows(path, [key(query, i) for i in ids[:over]])
            ids = ids[over:]
        self._ids[(path, query)] = ids
