"""Helpers shared by the `tests/test_source_*` Spark tests: run a `yt` stream and read what it did."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pyspark.sql import DataFrame, Row, SparkSession
from pyspark.sql.streaming import StreamingQuery


def checkpoint_of(yt_root: str, name: str = "checkpoint") -> str:
    """A `yt:///...` checkpoint location next to the test's tables."""
    return f"yt:/{yt_root}/{name}"


def read_queue(spark: SparkSession, queue: str, consumer: str, **options: Any) -> DataFrame:
    reader = spark.readStream.format("yt").option("consumer_path", consumer)
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load(queue)


@dataclass
class Batch:
    """One micro-batch as Spark's progress reports it: rows and per-partition last-read offsets."""

    batch_id: int
    rows: int
    start: dict[int, int] | None
    end: dict[int, int]

    def sizes(self) -> dict[int, int]:
        start = self.start or {}
        return {p: last - start.get(p, -1) for p, last in self.end.items()}


def batches(query: StreamingQuery) -> list[Batch]:
    """The query's micro-batches that read something (idle progress events are left out)."""
    found = []
    for progress in query.recentProgress:
        source = progress["sources"][0]
        if progress["numInputRows"] == 0 and source["startOffset"] == source["endOffset"]:
            continue
        start = json.loads(source["startOffset"]) if source["startOffset"] else None
        end = json.loads(source["endOffset"])
        found.append(Batch(progress["batchId"], progress["numInputRows"],
                           {int(p): v for p, v in start["partitions"].items()} if start else None,
                           {int(p): v for p, v in end["partitions"].items()}))
    return found


@dataclass
class Run:
    """What a query produced: its output rows (from every batch, in order) and its micro-batches."""

    rows: list[Row]
    batches: list[Batch]


class _Collector:
    """A `foreachBatch` function keeping each batch's rows in the driver (unlike the memory sink, it
    lets a query resume from its checkpoint)."""

    def __init__(self) -> None:
        self.rows: list[Row] = []

    def __call__(self, batch_df: DataFrame, batch_id: int) -> None:
        self.rows.extend(batch_df.collect())


def _start(df: DataFrame, checkpoint: str, trigger: dict, output_mode: str) -> tuple[StreamingQuery, _Collector]:
    collector = _Collector()
    query = (df.writeStream.foreachBatch(collector).outputMode(output_mode)
             .option("checkpointLocation", checkpoint).trigger(**trigger).start())
    return query, collector


def run_to_end(df: DataFrame, checkpoint: str, *, trigger: dict | None = None, output_mode: str = "append") -> Run:
    """Run `df` until the trigger ends the query (availableNow by default); fail with its error."""
    query, collector = _start(df, checkpoint, trigger or {"availableNow": True}, output_mode)
    try:
        query.awaitTermination(300)
        if query.exception():
            raise query.exception()
        return Run(collector.rows, batches(query))
    finally:
        query.stop()


def run_until(df: DataFrame, checkpoint: str, done: Callable[[StreamingQuery], bool], *,
              on_progress: Callable[[StreamingQuery], None] | None = None, timeout: float = 120) -> Run:
    """Run `df` with a processing-time trigger until `done(query)`, calling `on_progress` while waiting."""
    query, collector = _start(df, checkpoint, {"processingTime": "0 seconds"}, "append")
    try:
        deadline = time.monotonic() + timeout
        while not done(query):
            if query.exception():
                raise query.exception()
            if time.monotonic() > deadline:
                raise TimeoutError(f"query did not finish in {timeout} s: {batches(query)}")
            if on_progress:
                on_progress(query)
            time.sleep(0.1)
        query.processAllAvailable()
        return Run(collector.rows, batches(query))
    finally:
        query.stop()


def rows_read(query: StreamingQuery) -> int:
    return sum(b.rows for b in batches(query))


def numbered(count: int, start: int = 0) -> list[dict[str, Any]]:
    """Queue rows of the default test schema, numbered `n` from `start`."""
    return [{"data": f"row{n}", "n": n} for n in range(start, start + count)]


#: One column of each composite (and logical) type the source maps to Spark.
COMPOSITE_COLUMNS = [
    {"name": "l", "type_v3": {"type_name": "list", "item": "int64"}},
    {"name": "s", "type_v3": {"type_name": "struct", "members": [
        {"name": "a", "type": "int64"}, {"name": "b", "type": {"type_name": "optional", "item": "string"}}]}},
    {"name": "d", "type_v3": {"type_name": "dict", "key": "string", "value": "int64"}},
    {"name": "o", "type_v3": {"type_name": "optional", "item": "int64"}},
    {"name": "t", "type_v3": {"type_name": "tuple", "elements": [{"type": "int64"}, {"type": "string"}]}},
    {"name": "dec", "type_v3": {"type_name": "decimal", "precision": 10, "scale": 2}},
    {"name": "day", "type_v3": "date"},
    {"name": "ts", "type_v3": "timestamp"},
]
