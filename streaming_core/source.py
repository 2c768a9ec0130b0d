"""Readers of the `yt` data source: a queue read through a consumer as a stream, or any table as a batch.

Where things run (see the architecture): `initialOffset`, `latestOffset`, `partitions` and `commit` run in
the streaming source runner process, on one long-lived reader object; `read()` runs in Spark's Python
workers on unpickled copies. Readers therefore pickle as plain configuration and open the cluster lazily.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import DataSourceReader, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadLimit, ReadMaxRows, SupportsTriggerAvailableNow
from pyspark.sql.types import StructType

from .cluster import BeyondQueueEndError, Cluster, ClusterError, NotRegisteredError, TrimmedRowsError, connect
from .cluster.base import ORDERED, READ_BATCH_BYTES, READ_BATCH_ROWS, SORTED, STATIC, require_kind
from .cluster.schema import is_composite
from .consumer import advance_consumer
from .offsets import QueueOffset, batch_end, effective_start, from_consumer
from .options import INCLUDE_SERVICE_COLUMNS, SourceOptions
from .tuning import max_rows_in_force, read_tuning
from .types import arrow_schema_for_spark, conform

#: Default read limit when no cap is configured: "no cap yet", so a live tuning cap can still apply.
UNCAPPED = sys.maxsize


@dataclass
class TabletRange(InputPartition):
    """Rows `[lower, upper)` of one tablet of the queue (or the whole table when `tablet_index` is None)."""

    tablet_index: int | None
    lower: int
    upper: int


class _ClusterReader:
    """What batch and stream readers share: options, the Spark schema and a lazily opened cluster."""

    def __init__(self, options: SourceOptions, schema: StructType) -> None:
        self.options = options
        self.schema = schema
        self._cluster: Cluster | None = None

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_cluster": None}

    @property
    def cluster(self) -> Cluster:
        if self._cluster is None:
            self._cluster = connect(self.options.cluster)
        return self._cluster

    def _yson_columns(self, cluster: Cluster) -> frozenset[str]:
        if self.options.parsing_type_v3:
            return frozenset()
        return frozenset(c.name for c in cluster.get_schema(self.options.path).columns if is_composite(c.type_v3))

    def _consumer_path(self) -> str | None:
        """The consumer a stream reads through (its readers' access comes from its registration); None for batches."""
        return None

    def read(self, partition: TabletRange) -> Iterator[pa.RecordBatch]:
        """Called in a Spark Python worker: stream the partition's rows in bounded Arrow batches."""
        cluster = connect(self.options.cluster)
        target = arrow_schema_for_spark(self.schema)
        yson_columns = self._yson_columns(cluster)
        if partition.tablet_index is None:
            batches = cluster.read_table(self.options.path, max_rows=READ_BATCH_ROWS)
        else:
            batches = cluster.read_tablet(
                self.options.path, partition.tablet_index, partition.lower, partition.upper,
                max_rows=READ_BATCH_ROWS, max_bytes=READ_BATCH_BYTES,
                service_columns=self.options.include_service_columns, consumer_path=self._consumer_path(),
            )
        for batch in batches:
            yield conform(batch, target, yson_columns)


class YtBatchReader(_ClusterReader, DataSourceReader):
    """`spark.read.format("yt").load(path)`: all rows of a queue (every tablet), sorted or static table."""

    def partitions(self) -> list[TabletRange]:
        info = require_kind(self.cluster, self.options.path, ORDERED, SORTED, STATIC)
        if info.kind != ORDERED:
            return [TabletRange(None, 0, 0)]
        return [TabletRange(t.tablet_index, t.trimmed_row_count, t.total_row_count)
                for t in self.cluster.get_tablet_infos(self.options.path)]


class YtStreamReader(_ClusterReader, DataSourceStreamReader, SupportsTriggerAvailableNow):
    """`spark.readStream.format("yt")`: a queue through a consumer, with SPYT's offset rules.

    Notes
    -----
    Admission control: `getDefaultReadLimit` always returns `ReadMaxRows`, which this source reads as
    "apply the per-partition cap in force" (the tuning document's, else `max_rows_per_partition`), so
    opsd can impose a cap live even on a query started without one. `ReadAllAvailable` from the engine
    is obeyed. Offsets are checked against the queue's tablet count at every batch.
    """

    def __init__(self, options: SourceOptions, schema: StructType) -> None:
        super().__init__(options, schema)
        self._target: dict[int, int] | None = None
        self._latest: dict[int, int] | None = None

    def _consumer_path(self) -> str | None:
        return self.options.consumer_path

    # -- runner process ---------------------------------------------------------------------------

    def _offset(self, partitions: dict[int, int]) -> dict[str, Any]:
        return QueueOffset(self.cluster.name, self.options.path, partitions, self.options.consumer_path).to_json()

    def _consumer_last_read(self, partition_count: int) -> dict[int, int]:
        committed = self.cluster.get_consumer_offsets(self.options.consumer_path, self.options.path)
        return from_consumer(committed, partition_count)

    def _upper(self) -> dict[int, int]:
        """Per partition, the index of the last row written so far."""
        return {t.tablet_index: t.total_row_count - 1 for t in self.cluster.get_tablet_infos(self.options.path)}

    def _parse(self, offset: dict[str, Any], partition_count: int) -> QueueOffset:
        parsed = QueueOffset.from_json(offset)
        if parsed.path != self.options.path:
            raise ClusterError(f"checkpoint offset is for queue {parsed.path}, but this query reads "
                               f"{self.options.path}: use a new checkpointLocation for a different queue")
        if sorted(parsed.partitions) != list(range(partition_count)):
            raise ClusterError(
                f"{self.options.path}: the checkpoint has {len(parsed.partitions)} partitions but the queue now "
                f"has {partition_count} tablets; a change of the tablet count is not supported by a running "
                f"query - restart it with a new checkpointLocation (the consumer keeps its offsets)")
        return parsed

    def initialOffset(self) -> dict[str, Any]:
        """Called once when the query has no checkpoint: start where the consumer stands."""
        partition_count = len(self._upper())
        return self._offset(self._consumer_last_read(partition_count))

    def getDefaultReadLimit(self) -> ReadLimit:
        return ReadMaxRows(self.options.max_rows_per_partition or UNCAPPED)

    def prepareForTriggerAvailableNow(self) -> None:
        """Called first under `availableNow`: rows written after this point are left for later runs."""
        self._target = self._upper()

    def cap(self) -> int | None:
        """The per-partition row cap in force: the tuning document's, else the option's."""
        tuning = read_tuning(self.cluster, self.options.tuning_path)
        return max_rows_in_force(tuning, self.options.max_rows_per_partition)

    def _beyond_end(self, upper: dict[int, int], **offsets: dict[int, int]) -> None:
        """`BeyondQueueEndError` for the first partition where one of `offsets` (last read rows, by whose they are:
        `checkpoint`, `consumer`) is past the queue's last row `upper`."""
        for p in sorted(upper):
            past = {whose: last[p] for whose, last in offsets.items() if last.get(p, -1) > upper[p]}
            if past:
                raise beyond_end_error(self.options, p, past, upper[p] + 1, offsets["checkpoint"][p] + 1)

    def _begin(self, start: dict[str, Any]) -> tuple[dict[int, int], dict[int, int]]:
        """The last row read before the next batch per partition (the checkpoint's, or the consumer's when it is
        ahead: SPYT's rule) and the queue's last rows.

        Offsets past the queue's end are another queue's (the counters are read after them and a live queue only
        grows): `BeyondQueueEndError`, never a batch. An empty batch would wait for the queue to grow past the
        offset, then skip the rows below it (Kafka's `failOnDataLoss`)."""
        committed = self.cluster.get_consumer_offsets(self.options.consumer_path, self.options.path)
        upper = self._upper()
        checkpoint = self._parse(start, len(upper)).partitions
        consumer = from_consumer(committed, len(upper))
        self._beyond_end(upper, checkpoint=checkpoint, consumer=consumer)
        return effective_start(checkpoint, consumer), upper

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, Any]:
        """Called at every trigger: the end offset of the next batch, `min(start + cap, upper)`."""
        begin, upper = self._begin(start)
        self._latest = upper
        if self._target is not None:
            upper = {p: min(u, self._target.get(p, u)) for p, u in upper.items()}
        cap = None if isinstance(limit, ReadAllAvailable) else self.cap()
        return self._offset(batch_end(begin, upper, cap))

    def reportLatestOffset(self) -> dict[str, Any] | None:
        """The queue's end as last seen, so Spark's progress shows how far behind the query is."""
        return self._offset(self._latest) if self._latest is not None else None

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> list[TabletRange]:
        """Called when a batch is planned (or replayed): one Spark partition per tablet with rows to read."""
        begin, upper = self._begin(start)
        last = QueueOffset.from_json(end).partitions
        self._beyond_end(upper, checkpoint=last)  # a batch planned on another queue, replayed
        ranges = [TabletRange(p, begin[p] + 1, e + 1) for p, e in sorted(last.items()) if e > begin[p]]
        trimmed = {t.tablet_index: t.trimmed_row_count for t in self.cluster.get_tablet_infos(self.options.path)}
        for r in ranges:
            if r.tablet_index is not None and r.lower < trimmed.get(r.tablet_index, 0):
                raise trimmed_error(self.options, r, trimmed[r.tablet_index])
        return ranges

    def commit(self, end: dict[str, Any]) -> None:
        """Called when the batch after `end` is planned: acknowledge rows up to `end` in the consumer.

        All partitions advance in one transaction with compare-and-set, and never backwards
        (`streaming_core.consumer.advance_consumer`).
        """
        target = {p: last + 1 for p, last in QueueOffset.from_json(end).partitions.items()}
        advance_consumer(self.cluster, self.options.consumer_path, self.options.path, target)


def beyond_end_error(options: SourceOptions, partition: int, past: dict[str, int], rows: int,
                     checkpoint_next: int) -> BeyondQueueEndError:
    """The error for offsets past a queue's end (`{"checkpoint" | "consumer": last read row}`), with the way out:
    the consumer moved back by hand (to the checkpoint's next row when only the consumer is past the end), and a new
    checkpoint when the checkpoint is past it."""
    queue, consumer = options.path, options.consumer_path
    named = {"checkpoint": "the checkpoint", "consumer": f"the consumer {consumer}"}
    where = "; ".join(f"{named[whose]} is at row {last + 1} (last read {last})" for whose, last in past.items())
    if "checkpoint" in past:
        fix = (f"Stop the query, move the consumer to the queue's first row (opsd consumer seek {queue} {consumer} "
               f"--to trim --past-checkpoint) and restart the query with a new checkpointLocation")
    else:
        fix = (f"Stop the query, move the consumer back to the checkpoint (opsd consumer seek {queue} {consumer} "
               f"--partition {partition} --offset {checkpoint_next}) and restart it")
    return BeyondQueueEndError(
        f"{queue}: partition {partition}: {where}, but the queue ends at {rows} rows: the queue was recreated under "
        f"this path, or the offset is another queue's. Reading on would skip rows [{rows}, {max(past.values()) + 1}) "
        f"once they are written. {fix}")


def trimmed_error(options: SourceOptions, batch: TabletRange, trimmed: int) -> TrimmedRowsError:
    """The error for a batch whose first rows were trimmed before the query read them, with the way out: the
    consumer moved to the trim (the query resumes there, with its checkpoint: the source's rule), the rows lost."""
    p, queue, consumer = batch.tablet_index, options.path, options.consumer_path
    gone = TrimmedRowsError.of(queue, p, batch.lower, batch.upper, trimmed)
    return TrimmedRowsError(
        f"{gone}: {min(trimmed, batch.upper) - batch.lower} rows lost. To go on without them, stop the query, move "
        f"the consumer to the first row still there (opsd consumer seek {queue} {consumer} --partition {p} --to trim) "
        "and restart it: it resumes at the consumer, with its checkpoint")


def check_readable(cluster: Cluster, options: SourceOptions, *, streaming: bool) -> None:
    """Fail at `load()` with a clear message if the table or the consumer registration is wrong."""
    kinds = (ORDERED,) if streaming else (ORDERED, SORTED, STATIC)
    info = require_kind(cluster, options.path, *kinds)
    if options.include_service_columns and info.kind != ORDERED:
        raise ValueError(f"option {INCLUDE_SERVICE_COLUMNS!r} applies to queues (ordered dynamic tables); "
                         f"{options.path} is a {info.kind} table")
    if streaming:
        regs = cluster.list_queue_consumer_registrations(options.path, options.consumer_path)
        if not regs:
            raise NotRegisteredError(
                f"consumer {options.consumer_path} is not registered for queue {options.path} "
                f"(register it: opsd consumer register {options.path} {options.consumer_path})")
