"""Readers of the `yt` data source: a queue read through a consumer as a stream, or any table as a batch.

Where things run (see the architecture): `initialOffset`, `latestOffset`, `partitions` and `commit` run in
the streaming source runner process, on one long-lived reader object; `read()` runs in Spark's Python
workers on unpickled copies. Readers therefore pickle as plain configuration and open the cluster lazily.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import DataSourceReader, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxBytes,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import StructType

from .admission import byte_capped_end
from .cluster import (
    BeyondQueueEndError,
    Cluster,
    ClusterError,
    NotRegisteredError,
    QueueReshardedError,
    TabletInfo,
    TrimmedRowsError,
    connect,
)
from .cluster.base import ORDERED, READ_BATCH_BYTES, READ_BATCH_ROWS, SORTED, STATIC, require_kind
from .cluster.errors import AccessDeniedError, on_executor
from .cluster.schema import CUMULATIVE_DATA_WEIGHT, TableSchema, is_composite
from .consumer import advance_consumer, registration_seen
from .log import get_logger
from .offsets import (
    QueueOffset,
    added_partitions,
    batch_end,
    effective_start,
    from_consumer,
    removed_partitions,
)
from .options import INCLUDE_SERVICE_COLUMNS, SRC_ROW_INDEX, SRC_TABLET_INDEX, SourceOptions
from .phase_timing import TaskClock, current_batch_id, record_read
from .tuning import max_bytes_in_force, max_rows_in_force, read_tuning
from .types import arrow_schema_for_spark, conform, yt_schema

log = get_logger(__name__)

#: Default read limit when no cap is configured: "no cap yet", so a live tuning cap can still apply.
UNCAPPED = sys.maxsize


@dataclass
class TabletRange(InputPartition):
    """Rows `[lower, upper)` of one tablet of the queue (or the whole table when `tablet_index` is None)."""

    tablet_index: int | None
    lower: int
    upper: int
    #: seconds the source's runner spent acknowledging the previous batch while this one was planned (the batch's
    #: first partition carries it to its read task, which records it: `streaming_core.phases`).
    acknowledge: float = 0.0
    #: the columns read as YSON (composite columns without `parsing_type_v3`), decided where the batch is planned, so
    #: that no read task asks the cluster for the table's schema again.
    yson_columns: frozenset[str] = frozenset()
    #: the table's schema as planned (for a stream granted the queue through its consumer only, the columns it names):
    #: the read task's, so that it asks the cluster for no schema (None for a whole table).
    table_schema: TableSchema | None = None


class _ClusterReader:
    """What batch and stream readers share: options, the Spark schema and a lazily opened cluster."""

    def __init__(self, options: SourceOptions, schema: StructType) -> None:
        self.options = options
        self.schema = schema
        self._cluster: Cluster | None = None
        self._schema: TableSchema | None = None

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_cluster": None}

    @property
    def cluster(self) -> Cluster:
        if self._cluster is None:
            self._cluster = connect(self.options.cluster)
        return self._cluster

    def _table_schema(self) -> TableSchema:
        """The table's YT schema, asked of the cluster once per reader (where batches are planned): its `@schema`, or,
        for a stream whose user may not read the queue (granted it through its consumer only), the columns the query
        named (`readStream.schema(...)`) as YT types."""
        if self._schema is None:
            try:
                self._schema = self.cluster.get_schema(self.options.path)
            except AccessDeniedError:
                if self._consumer_path() is None:
                    raise
                named = StructType([f for f in self.schema.fields if f.name not in (SRC_TABLET_INDEX, SRC_ROW_INDEX)])
                self._schema = TableSchema.from_yt(yt_schema(named, type_v3=self.options.parsing_type_v3))
        return self._schema

    def _yson_columns(self) -> frozenset[str]:
        """The columns read as YSON (composite columns without `parsing_type_v3`)."""
        if self.options.parsing_type_v3:
            return frozenset()
        return frozenset(c.name for c in self._table_schema().columns if is_composite(c.type_v3))

    def _consumer_path(self) -> str | None:
        """The consumer a stream reads through (its readers' access comes from its registration); None for batches."""
        return None

    def read(self, partition: TabletRange) -> Iterator[pa.RecordBatch]:
        """Called in a Spark Python worker: stream the partition's rows in bounded Arrow batches; a micro-batch's task
        records where its time went at the end (`streaming_core.phases`)."""
        with on_executor():
            clock = TaskClock()
            cluster = connect(self.options.cluster)
            target = arrow_schema_for_spark(self.schema)
            if partition.tablet_index is None:
                batches = cluster.read_table(self.options.path, max_rows=READ_BATCH_ROWS)
            else:
                batches = cluster.read_tablet(
                    self.options.path, partition.tablet_index, partition.lower, partition.upper,
                    max_rows=READ_BATCH_ROWS, max_bytes=READ_BATCH_BYTES,
                    service_columns=self.options.include_service_columns, consumer_path=self._consumer_path(),
                    schema=partition.table_schema,
                )
            for batch in clock.timed(batches):
                started = time.perf_counter()
                conformed = conform(batch, target, partition.yson_columns)
                clock.decoded(time.perf_counter() - started)
                yield conformed
            batch_id = current_batch_id()
            if batch_id is not None:
                record_read(cluster, self.options.tuning_path, partition.tablet_index,
                            clock.read_times(batch_id, partition.acknowledge))


class YtBatchReader(_ClusterReader, DataSourceReader):
    """`spark.read.format("yt").load(path)`: all rows of a queue (every tablet), sorted or static table."""

    def partitions(self) -> list[TabletRange]:
        info = require_kind(self.cluster, self.options.path, ORDERED, SORTED, STATIC)
        yson = self._yson_columns()
        if info.kind != ORDERED:
            return [TabletRange(None, 0, 0, yson_columns=yson)]
        return [TabletRange(t.tablet_index, t.trimmed_row_count, t.total_row_count, yson_columns=yson,
                            table_schema=self._table_schema())
                for t in self.cluster.get_tablet_infos(self.options.path)]


class YtStreamReader(_ClusterReader, DataSourceStreamReader, SupportsTriggerAvailableNow):
    """`spark.readStream.format("yt")`: a queue through a consumer, with SPYT's offset rules.

    Notes
    -----
    Admission control: `getDefaultReadLimit` returns `ReadMaxRows`, or `ReadMaxBytes` when only
    `max_bytes_per_partition` is configured; this source reads either as "apply the per-partition caps in force"
    (the tuning document's `max_rows_per_partition` and `max_bytes_per_partition`, else the options'; each
    partition's batch ends where the first of them binds, `streaming_core.admission`), so opsd can impose a cap live
    even on a query started without one. `ReadAllAvailable` from the engine is obeyed. Offsets are checked against
    the queue's tablets at every batch: tablets added to the queue (a reshard to more tablets) are read from the next
    batch on, from the consumer's offsets (or 0); partitions the checkpoint has read that the queue no longer has stop
    the query (`QueueReshardedError`), as does a partition with fewer rows than the checkpoint read
    (`BeyondQueueEndError`).
    """

    def __init__(self, options: SourceOptions, schema: StructType) -> None:
        super().__init__(options, schema)
        self._target: dict[int, int] | None = None
        self._latest: dict[int, int] | None = None
        self._has_cumulative: bool | None = None
        #: seconds acknowledging since the last planned batch (Spark commits while it plans the next batch).
        self._acknowledging = 0.0

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
        return last_rows(self.cluster.get_tablet_infos(self.options.path))

    def _parse(self, offset: dict[str, Any], partition_count: int) -> QueueOffset:
        """The offset, checked against this query's queue and its `partition_count` tablets now: partitions it does not
        name were added since and are read from the consumer's offsets; partitions the queue no longer has stop the
        query (`QueueReshardedError`)."""
        parsed = QueueOffset.from_json(offset)
        if parsed.path != self.options.path:
            raise ClusterError(f"checkpoint offset is for queue {parsed.path}, but this query reads "
                               f"{self.options.path}: use a new checkpointLocation for a different queue")
        removed = removed_partitions(parsed.partitions, partition_count)
        if removed:
            raise resharded_error(self.options, removed, partition_count)
        return parsed

    def initialOffset(self) -> dict[str, Any]:
        """Called once when the query has no checkpoint: start where the consumer stands."""
        partition_count = len(self._upper())
        return self._offset(self._consumer_last_read(partition_count))

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.options.max_bytes_per_partition and not self.options.max_rows_per_partition:
            return ReadMaxBytes(self.options.max_bytes_per_partition)
        return ReadMaxRows(self.options.max_rows_per_partition or UNCAPPED)

    def prepareForTriggerAvailableNow(self) -> None:
        """Called first under `availableNow`: rows written after this point are left for later runs."""
        self._target = self._upper()

    def caps(self) -> tuple[int | None, int | None]:
        """The per-partition row and byte caps in force: the tuning document's, else the options' (None: no cap)."""
        tuning = read_tuning(self.cluster, self.options.tuning_path)
        return (max_rows_in_force(tuning, self.options.max_rows_per_partition),
                max_bytes_in_force(tuning, self.options.max_bytes_per_partition))

    def _byte_capped(self, begin: dict[int, int], end: dict[int, int], max_bytes: int) -> dict[int, int]:
        """Each partition's end moved back to where its rows reach `max_bytes` (`streaming_core.admission`)."""
        if self._has_cumulative is None:
            self._has_cumulative = CUMULATIVE_DATA_WEIGHT in self._table_schema().names
        try:
            return {p: byte_capped_end(self.cluster, self.options.path, p, begin[p], e, max_bytes,
                                       self._has_cumulative) for p, e in end.items()}
        except AccessDeniedError as e:  # the probes read the queue: a stream granted only its consumer cannot
            log.warning("byte_cap_needs_read_on_the_queue", queue=self.options.path, max_bytes=max_bytes,
                        reason=str(e))
            return end

    def _beyond_end(self, upper: dict[int, int], **offsets: dict[int, int]) -> None:
        """`BeyondQueueEndError` for the first partition where one of `offsets` (last read rows, by whose they are:
        `checkpoint`, `consumer`) is past the queue's last row `upper`."""
        for p in sorted(upper):
            past = {whose: last[p] for whose, last in offsets.items() if last.get(p, -1) > upper[p]}
            if past:
                raise beyond_end_error(self.options, p, past, upper[p] + 1, offsets["checkpoint"].get(p, -1) + 1)

    def _begin(self, start: dict[str, Any]) -> tuple[dict[int, int], list[TabletInfo]]:
        """The last row read before the next batch per partition (the checkpoint's, or the consumer's when it is
        ahead: SPYT's rule; the consumer's for a partition added to the queue since the checkpoint) and the queue's
        tablets (their counters, read once per call: `last_rows` gives each partition's last row).

        Offsets past the queue's end are another queue's (the counters are read after them and a live queue only
        grows): `BeyondQueueEndError`, never a batch. An empty batch would wait for the queue to grow past the
        offset, then skip the rows below it (Kafka's `failOnDataLoss`)."""
        committed = self.cluster.get_consumer_offsets(self.options.consumer_path, self.options.path)
        tablets = self.cluster.get_tablet_infos(self.options.path)
        upper = last_rows(tablets)
        checkpoint = self._parse(start, len(upper)).partitions
        consumer = from_consumer(committed, len(upper))
        self._beyond_end(upper, checkpoint=checkpoint, consumer=consumer)
        return effective_start(checkpoint, consumer), tablets

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, Any]:
        """Called at every trigger: the end offset of the next batch, `min(start + cap, upper)`."""
        begin, tablets = self._begin(start)
        upper = last_rows(tablets)
        added = added_partitions(QueueOffset.from_json(start).partitions, len(upper))
        if added:  # planned once: the batch's end names them, and so do the next batches' starts
            log.info("queue_partitions_added", queue=self.options.path, consumer=self.options.consumer_path,
                     partitions=added, start={str(p): begin[p] + 1 for p in added})
        self._latest = upper
        if self._target is not None:  # a partition added since availableNow began has nothing to read in this run
            upper = {p: min(u, self._target.get(p, -1)) for p, u in upper.items()}
        if isinstance(limit, ReadAllAvailable):
            return self._offset(batch_end(begin, upper, None))
        max_rows, max_bytes = self.caps()
        end = batch_end(begin, upper, max_rows)
        return self._offset(self._byte_capped(begin, end, max_bytes) if max_bytes else end)

    def reportLatestOffset(self) -> dict[str, Any] | None:
        """The queue's end as last seen, so Spark's progress shows how far behind the query is."""
        return self._offset(self._latest) if self._latest is not None else None

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> list[TabletRange]:
        """Called when a batch is planned (or replayed): one Spark partition per tablet with rows to read."""
        begin, tablets = self._begin(start)
        upper = last_rows(tablets)
        last = self._parse(end, len(upper)).partitions  # planned before tablets were removed: refused
        self._beyond_end(upper, checkpoint=last)  # a batch planned on another queue, replayed
        yson, schema = self._yson_columns(), self._table_schema()
        ranges = [TabletRange(p, begin[p] + 1, e + 1, yson_columns=yson, table_schema=schema)
                  for p, e in sorted(last.items()) if e > begin[p]]
        trimmed = {t.tablet_index: t.trimmed_row_count for t in tablets}
        for r in ranges:
            if r.tablet_index is not None and r.lower < trimmed.get(r.tablet_index, 0):
                raise trimmed_error(self.options, r, trimmed[r.tablet_index])
        if ranges:
            ranges[0].acknowledge, self._acknowledging = self._acknowledging, 0.0
        return ranges

    def commit(self, end: dict[str, Any]) -> None:
        """Called when the batch after `end` is planned: acknowledge rows up to `end` in the consumer.

        All partitions advance in one transaction with compare-and-set, and never backwards
        (`streaming_core.consumer.advance_consumer`).
        """
        started = time.perf_counter()
        target = {p: last + 1 for p, last in QueueOffset.from_json(end).partitions.items()}
        advance_consumer(self.cluster, self.options.consumer_path, self.options.path, target)
        self._acknowledging += time.perf_counter() - started


def last_rows(tablets: list[TabletInfo]) -> dict[int, int]:
    """Per partition, the index of its last row written so far (-1: none)."""
    return {t.tablet_index: t.total_row_count - 1 for t in tablets}


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
        f"this path, its tablets were removed and added again by reshards, or the offset is another queue's. Reading "
        f"on would skip rows [{rows}, {max(past.values()) + 1}) once they are written. {fix}")


def resharded_error(options: SourceOptions, removed: list[int], partition_count: int) -> QueueReshardedError:
    """The error for a checkpoint that has read partitions the queue no longer has, with the way out."""
    queue, consumer = options.path, options.consumer_path
    named = "partition" + ("s " if len(removed) > 1 else " ") + ", ".join(map(str, removed))
    return QueueReshardedError(
        f"{queue}: the checkpoint has read {named}, but the queue now has {partition_count} tablet(s) "
        f"(0..{partition_count - 1}): tablets were removed (a reshard to fewer tablets), so a running query cannot go "
        f"on from this checkpoint. Restart the query with a new checkpointLocation: it starts where the consumer "
        f"{consumer} stands on each partition. To scale a queue under a running query, only add tablets (opsd queue "
        f"reshard {queue} --tablets N, N above the current count): they are read without a restart")


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
    try:
        info = require_kind(cluster, options.path, *kinds)
    except AccessDeniedError as e:
        if not streaming:
            raise
        # Granted the queue through its consumer only (YTsaurus' `pull_consumer` needs read on the consumer and a
        # registration, not read on the queue): the registration below is the check that holds.
        log.info("queue_read_through_consumer_only", queue=options.path, consumer=options.consumer_path,
                 reason=str(e))
        info = None
    if options.include_service_columns and info is not None and info.kind != ORDERED:
        raise ValueError(f"option {INCLUDE_SERVICE_COLUMNS!r} applies to queues (ordered dynamic tables); "
                         f"{options.path} is a {info.kind} table")
    if streaming and not registration_seen(cluster, options.path, options.consumer_path):
        raise NotRegisteredError(
            f"consumer {options.consumer_path} is not registered for queue {options.path} "
            f"(register it: opsd consumer register {options.path} {options.consumer_path})")
