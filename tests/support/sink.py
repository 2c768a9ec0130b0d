"""Helpers shared by the `tests/test_sink_*` tests: tables to write into, and what the cluster stored."""

from __future__ import annotations

import contextlib
import sqlite3
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession

from streaming_core.cluster.base import Cluster
from streaming_core.cluster.embedded.sqlite_store import DB_FILE
from streaming_core.datasource import register

#: Output schema of a queue -> sink copy of `tests.support.cluster.QUEUE_SCHEMA` rows.
COPY_SCHEMA = [{"name": "data", "type": "string"}, {"name": "n", "type": "int64"}]


def make_table(cluster: Cluster, path: str, schema: list[dict[str, Any]], *, tablets: int = 1) -> None:
    """A dynamic table (ordered unless the schema has key columns), created as users do before a query."""
    attributes: dict[str, Any] = {"dynamic": True, "schema": schema}
    if not any(c.get("sort_order") for c in schema):
        attributes["tablet_count"] = tablets
    cluster.create("table", path, recursive=True, attributes=attributes)


def fill_queue(cluster: Cluster, queue: str, rows_per_tablet: int, tablets: int = 2) -> list[dict[str, Any]]:
    """Rows `data="r<t>-<i>", n=t*100000+i` in each tablet; returns them all."""
    written = []
    for t in range(tablets):
        rows = [{"data": f"r{t}-{i}", "n": t * 100_000 + i} for i in range(rows_per_tablet)]
        cluster.insert_rows(queue, rows, tablet_index=t)
        written += rows
    return written


def ordered_rows(cluster: Cluster, path: str) -> list[dict[str, Any]]:
    """Every row of an ordered table, tablet by tablet in row order."""
    rows = []
    for info in cluster.get_tablet_infos(path):
        for batch in cluster.read_tablet(path, info.tablet_index, info.trimmed_row_count, info.total_row_count):
            rows += batch.to_pylist()
    return rows


def multiset(rows: list[dict[str, Any]], *columns: str) -> Counter:
    return Counter(tuple(r[c] for c in columns) for r in rows)


def stored_chunks(cluster_root: str | Path, path: str) -> list[int]:
    """Row counts of the chunks the embedded cluster stored for an ordered table, in write order.

    An insert call of fewer than 16384 small rows into one tablet is stored as exactly one chunk, so for a
    one-tablet table these are the sizes of the insert calls.
    """
    with contextlib.closing(sqlite3.connect(Path(cluster_root) / DB_FILE)) as conn:
        return [n for (n,) in conn.execute(
            "SELECT row_count FROM chunks WHERE path=? ORDER BY tablet, first_row", (path,))]


@contextlib.contextmanager
def session_conf(spark: SparkSession, **conf: str) -> Iterator[None]:
    """Set `spark.yt.*` session conf (dots as `__`) and re-register the format; restore both afterwards."""
    keys = {k.replace("__", "."): v for k, v in conf.items()}
    before = {k: spark.conf.get(k, None) for k in keys}
    for key, value in keys.items():
        spark.conf.set(key, value)
    register(spark)
    try:
        yield
    finally:
        for key, value in before.items():
            if value is None:
                spark.conf.unset(key)
            else:
                spark.conf.set(key, value)
        register(spark)


def run_listing(spark: SparkSession, listing: Callable[[], None], done: Callable[[], bool]) -> None:
    """Run `listing` until `done()`, then stop its query (as Ctrl-C would) so that its wait returns.

    The listing runs in this thread (Spark resolves `format("yt")` through the session of the calling
    thread); a watcher thread stops the query.
    """
    finished = threading.Event()

    def watch() -> None:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and not (spark.streams.active and done()):
            time.sleep(0.5)
        if done():
            finished.set()
        for query in spark.streams.active:
            query.stop()

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    listing()
    watcher.join(60)
    assert finished.is_set(), "the listing's query did not write every row within 300 s"
