"""Writers of the `yt` data source: micro-batches and DataFrames into dynamic (and static) tables.

Guarantees (see the architecture):
- at-least-once (default): a replayed batch may write its rows again. On the embedded cluster, whose tablet
  transactions take any number of rows, tasks stage their rows and the commit publishes the whole batch at once
  (as below, without a marker): a batch that fails on its data (a value that does not fit a column) leaves
  nothing of itself in the target. On YTsaurus (at most 100,000 rows per tablet per transaction) each task
  inserts its rows in calls of at most `dynBatchSize` rows, so the rows of the tasks that succeeded stay.
- transactional (`spark.yt.streaming.transactional=true`): tasks stage their rows in the cluster; the
  commit (in the driver's runner process) publishes every staged row of the batch into the target and
  records the marker `(query, batch id)` in one tablet transaction (`Transaction.publish_table`: the
  embedded cluster moves the staged chunks, YTsaurus copies the rows). A replayed batch finds the marker and writes
  nothing, also after a restart on another machine: exactly-once for any transformation.
- idempotent receiver: at-least-once into a sorted table keyed by the source's service columns, so a
  replay upserts the same keys.
- producer mode (`producer_path`, a YTsaurus queue producer): tasks push their rows with sequence numbers that make
  a replay skip what was written; exactly-once into a queue without a per-batch row limit, zombie tasks fenced off
  (`streaming_core.sink_producer`).
- batch writes (`df.write`): all or nothing, by the same staging and publishing (without a marker).

Where things run: `write()` in Spark's Python workers (unpickled copies; the cluster is opened there);
`commit`/`abort` in a runner process on a fresh writer object.
"""

from __future__ import annotations

import hashlib
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import pyarrow as pa
from pyspark import TaskContext
from pyspark.sql.datasource import DataSourceArrowWriter, DataSourceStreamArrowWriter, WriterCommitMessage
from pyspark.sql.types import StructType

from . import insert_failure, sink_producer
from .cluster import Cluster, SchemaError, TableSchema, connect
from .cluster.base import MAP_NODE, ORDERED, SORTED, STATIC, TABLE, require_kind
from .cluster.errors import ConflictError, ZombieEpochError, on_executor
from .cluster.schema import is_composite, to_arrow_table
from .log import get_logger
from .options import SinkOptions
from .phase_timing import TaskClock, current_batch_id, record_sink
from .phases import TaskTimes
from .tuning import dyn_batch_size_in_force, read_tuning
from .types import arrow_schema_for_spark, from_yson, to_yson
from .write_stats import WriteStats, record_write_stats

log = get_logger(__name__)

#: Commit log of transactional mode: one row per committed (query, batch id).
COMMIT_LOG_SCHEMA = [
    {"name": "query", "type": "string", "required": True, "sort_order": "ascending"},
    {"name": "batch_id", "type": "int64", "required": True, "sort_order": "ascending"},
    {"name": "rows", "type": "int64", "required": True},
    {"name": "committed_at", "type": "double", "required": True},
]


@dataclass
class WrittenPart(WriterCommitMessage):
    """What one task wrote: row count, and for transactional mode the staging table holding the rows."""

    rows: int
    staging_path: str | None = None
    stats: WriteStats | None = None
    #: where the task's time went (a micro-batch's task: `streaming_core.phases`).
    times: TaskTimes | None = None


@dataclass(frozen=True)
class SinkPlan:
    """What every writer needs, computed once when the query starts and pickled to the workers."""

    options: SinkOptions
    schema: TableSchema
    kind: str
    yson_columns: frozenset[str] = field(default_factory=frozenset)
    #: Where tasks stage their rows for the commit to publish the whole batch at once (None: tasks insert): always
    #: when transactional, and at-least-once too where a tablet transaction takes any number of rows (the
    #: embedded cluster), so that a batch that fails on its data leaves nothing of itself in the target.
    staging_root: str | None = None


def plan_sink(options: SinkOptions, df_schema: StructType, *, overwrite: bool,
              kinds: tuple[str, ...] = (ORDERED, SORTED)) -> SinkPlan:
    """Check the target against the DataFrame before any row is written; errors name the columns."""
    if options.producer_path:
        kinds = (ORDERED,)  # a producer writes into a queue
    with connect(options.cluster) as cluster:
        info = require_kind(cluster, options.path, *kinds)
        schema = TableSchema.from_yt(info.attributes["schema"])
        unbounded_transactions = cluster.max_rows_per_tablet_transaction is None
        if options.producer_path:
            sink_producer.prepare_producer(cluster, options)
    if options.producer_path:
        return _plan_producer(options, schema, df_schema)
    if overwrite and info.kind == ORDERED:
        raise SchemaError(f"{options.path}: output mode 'complete' rewrites the result and needs a sorted "
                          f"(keyed) dynamic table; an ordered table only takes 'append'")
    yson = frozenset() if options.write_type_v3 else frozenset(
        c.name for c in schema.columns if is_composite(c.type_v3))
    stage = options.transactional or (unbounded_transactions and info.kind != STATIC)
    plan = SinkPlan(options, schema, info.kind, yson, staging_root=_staging_root(options) if stage else None)
    _check_fits(plan, arrow_schema_for_spark(df_schema))
    return plan


def _plan_producer(options: SinkOptions, schema: TableSchema, df_schema: StructType) -> SinkPlan:
    """Producer mode's plan: tasks push (nothing staged); source mode's service columns are read, not written."""
    sink_producer.session_prefix(options)  # a query without a name for its sessions fails now, not in a task
    df_arrow = arrow_schema_for_spark(df_schema)
    missing = sink_producer.source_columns_missing(options, df_arrow.names)
    if missing:
        raise SchemaError(f"{options.path}: producer_sequence=source numbers rows by the source's service columns "
                          f"{missing}: read the queue with include_service_columns=true")
    yson = frozenset() if options.write_type_v3 else frozenset(
        c.name for c in schema.columns if is_composite(c.type_v3))
    plan = SinkPlan(options, schema, ORDERED, yson)
    _check_fits(plan, pa.schema([f for f in df_arrow if f.name in schema.names
                                 or f.name not in sink_producer.SOURCE_COLUMNS]))
    return plan


def _check_fits(plan: SinkPlan, df_arrow: pa.Schema) -> None:
    """Every problem of the DataFrame's columns against the table, reported at once, before any write."""
    target = plan.schema
    names = set(df_arrow.names)
    unknown = [n for n in df_arrow.names if n not in target.names]
    missing = [c.name for c in target.columns if c.name not in names and (c.required or c.sort_order)]
    wrong = [f"{f.name} ({f.type}; the table wants {target.column(f.name).arrow_field().type})" for f in df_arrow
             if f.name in target.names and not _column_fits(plan, f)]
    problems = [f"{what} {', '.join(cols)}" for what, cols in (
        ("columns not in the table:", unknown), ("required or key columns missing:", missing),
        ("columns of the wrong type:", wrong)) if cols]
    if problems:
        raise SchemaError(f"{plan.options.path}: the DataFrame does not fit the table: {'; '.join(problems)} "
                          f"(DataFrame columns: {df_arrow.names}; table columns: {target.names})")


def _column_fits(plan: SinkPlan, field: pa.Field) -> bool:
    """The column's own type fits; composite columns also take YSON binary when write_type_v3 is off."""
    yson = field.name in plan.yson_columns and pa.types.is_binary(field.type)
    return yson or _encodes_as_yson(plan, field) or _fits(field.type, plan.schema.column(field.name).arrow_field().type)


def _fits(source: pa.DataType, target: pa.DataType) -> bool:
    """Whether values of `source` convert to `target` without changing meaning (value range checked later)."""
    if source == target or pa.types.is_null(source):
        return True
    t = pa.types
    if t.is_integer(target) or t.is_floating(target) or t.is_decimal(target):
        accepted = [t.is_integer] + ([t.is_floating] if t.is_floating(target) else []) \
            + ([t.is_decimal] if t.is_decimal(target) else [])
        return any(check(source) for check in accepted)
    for family in ((t.is_string, t.is_large_string), (t.is_binary, t.is_large_binary), (t.is_boolean,),
                   (t.is_date,), (t.is_timestamp,)):
        if any(check(target) for check in family):
            return any(check(source) for check in family)
    if t.is_list(target) or t.is_large_list(target):
        return (t.is_list(source) or t.is_large_list(source)) and _fits(source.value_type, target.value_type)
    if t.is_map(target):
        return t.is_map(source) and _fits(source.key_type, target.key_type) \
            and _fits(source.item_type, target.item_type)
    if t.is_struct(target) and t.is_struct(source):
        members = {f.name: f for f in target}
        given = {f.name: f for f in source}
        return all(n in members and _fits(f.type, members[n].type) for n, f in given.items()) \
            and all(f.nullable or n in given for n, f in members.items())
    return False


def _encodes_as_yson(plan: SinkPlan, field: pa.Field) -> bool:
    """A composite DataFrame column into a `yson` table column (tables made without write_type_v3)."""
    return pa.types.is_nested(field.type) and plan.schema.column(field.name).arrow_field().type == pa.binary()


def _to_target(plan: SinkPlan, table: pa.Table) -> pa.Table:
    for f in table.schema:
        if f.name in plan.schema.names and _encodes_as_yson(plan, f):
            table = table.set_column(table.column_names.index(f.name), f.name, to_yson(table[f.name].to_pylist()))
    for name in plan.yson_columns & set(table.column_names):
        column = table.column(name)
        if pa.types.is_binary(column.type):  # YSON from the DataFrame; typed values are cast below
            target = plan.schema.column(name).arrow_field().type
            values = from_yson(column.to_pylist(), target)
            table = table.set_column(table.column_names.index(name), name, values)
    return to_arrow_table(plan.schema, table, plan.options.path)


def chunk_rows(plan: SinkPlan, cluster: Cluster) -> int:
    """Rows per insert call: the tuning document's dynBatchSize, else the option/conf, below YT's limit."""
    return dyn_batch_size_in_force(read_tuning(cluster, plan.options.tuning_path), plan.options.dyn_batch_size)


def chunks(batches: Iterator[pa.RecordBatch], size: int) -> Iterator[pa.Table]:
    """Regroup incoming Arrow batches into tables of exactly `size` rows (the last may be smaller)."""
    pending: list[pa.RecordBatch] = []
    rows = 0
    for batch in batches:
        pending.append(batch)
        rows += batch.num_rows
        while rows >= size:
            table = pa.Table.from_batches(pending)
            yield table.slice(0, size)
            rest = table.slice(size)
            pending, rows = rest.to_batches(), rest.num_rows
    if rows:
        yield pa.Table.from_batches(pending)


def write_rows(plan: SinkPlan, batches: Iterator[pa.RecordBatch], staging_root: str | None = None, *,
               root_made: bool = False) -> WrittenPart:
    """Called in a Spark worker: insert the task's rows in chunks, or stage them below `staging_root`.

    `root_made`: the write made its staging root before any task ran (batch writes), so a task never makes it: a
    task that outlives its write's abort (Spark kills tasks asynchronously) then fails instead of leaving a staging
    directory behind."""
    clock = TaskClock()
    with on_executor(), connect(plan.options.cluster) as cluster:
        size = chunk_rows(plan, cluster)
        if plan.options.producer_path:
            return _push_rows(plan, cluster, batches, size)
        staging = _staging_path(staging_root) if staging_root else None
        if staging:
            cluster.create(TABLE, staging, recursive=not root_made, attributes={"schema": _unsorted(plan.schema)})
        rows, stats = 0, WriteStats()
        for chunk in chunks(clock.timed(batches), size):
            table = _to_target(plan, chunk)
            started = time.perf_counter()
            try:
                if staging or plan.kind == STATIC:
                    cluster.write_table(staging or plan.options.path, table, append=True)
                else:
                    cluster.insert_rows(plan.options.path, table)
            except Exception as e:  # marked, not handled: the tuner must know an insert call failed
                insert_failure.mark(e, plan.options.path, table.num_rows, size)
                raise
            stats = stats.call(table.num_rows, time.perf_counter() - started, size)
            rows += table.num_rows
    batch_id = current_batch_id()
    return WrittenPart(rows=rows, staging_path=staging, stats=stats,
                       times=None if batch_id is None else clock.sink_times(batch_id))


def _push_rows(plan: SinkPlan, cluster: Cluster, batches: Iterator[pa.RecordBatch], size: int) -> WrittenPart:
    """Producer mode's task: every chunk pushed through the task's producer sessions (`sink_producer`)."""
    ctx = TaskContext.get()
    batch_id = ctx.getLocalProperty("streaming.sql.batchId") if ctx else None
    if batch_id is None:
        raise SchemaError(f"{plan.options.path}: producer mode writes micro-batches of a stream (writeStream), "
                          f"not a batch DataFrame")
    task = sink_producer.TaskPosition(int(batch_id), ctx.partitionId(), ctx.attemptNumber())
    pusher = sink_producer.SessionPusher(cluster, plan.options, task)
    written = set(plan.schema.names)

    def pairs() -> Iterator[tuple[pa.Table, pa.Table]]:
        for chunk in chunks(batches, size):
            yield chunk, _to_target(plan, chunk.select([n for n in chunk.column_names if n in written]))

    try:
        stats = pusher.push_all(pairs(), size)
    except ZombieEpochError:  # fenced off: not a failed call the tuner should answer
        raise
    except Exception as e:  # marked, not handled: the tuner must know a push failed
        insert_failure.mark(e, plan.options.path, size, size)
        raise
    return WrittenPart(rows=stats.rows, stats=stats)


def record_batch_stats(plan: SinkPlan, parts: list[WrittenPart | None], batch_id: int, *,
                       abort_failures: int = 0, commit_seconds: float | None = None) -> None:
    """Runner process, at a batch's commit or abort: store its tasks' insert statistics for opsd
    (`streaming_core.write_stats`), a task that failed left no message and counts as an error; after a commit that
    took `commit_seconds`, where the batch's time went in the sink too (`streaming_core.phases`)."""
    stats = WriteStats.total([p.stats if p else None for p in parts], batch_id, time.time(),
                             errors=sum(p is None for p in parts), abort_failures=abort_failures)
    with connect(plan.options.cluster) as cluster:
        record_write_stats(cluster, plan.options.tuning_path, stats)
        if commit_seconds is not None:
            record_sink(cluster, plan.options.tuning_path, batch_id,
                        [p.times for p in parts if p and p.times], commit_seconds)


def _unsorted(schema: TableSchema) -> list[dict]:
    """The target's columns for a static staging table: no sort order, nor what only a dynamic table has."""
    return [{k: v for k, v in c.items() if k not in ("sort_order", "expression", "aggregate", "lock")}
            for c in schema.to_yt()]


def query_key(options: SinkOptions) -> str:
    """Identity of a query across restarts: its checkpoint location (stable), else its name."""
    key = options.checkpoint_location or options.query_name
    if not key:
        raise ValueError("transactional mode needs a checkpointLocation (or a queryName) to record "
                         "committed batches across restarts")
    return key


def _staging_root(options: SinkOptions) -> str:
    """The query's staging directory: named by its checkpoint (stable across restarts, so a restart finds what a
    crashed run staged); an at-least-once query with neither checkpoint nor name gets one of its own."""
    key = query_key(options) if options.transactional else (
        options.checkpoint_location or options.query_name or uuid.uuid4().hex)
    digest = hashlib.sha1(key.encode()).hexdigest()[:16]
    return f"{options.path}_staging/{digest}"


def _staging_path(root: str) -> str:
    ctx = TaskContext.get()
    task = f"{ctx.partitionId()}-{ctx.taskAttemptId()}" if ctx else uuid.uuid4().hex
    return f"{root}/{task}-{uuid.uuid4().hex[:8]}"


def commit_log_path(options: SinkOptions) -> str:
    return f"{options.path}_commits"


def commit_key(options: SinkOptions, batch_id: int) -> dict[str, str | int]:
    """The key of a batch's row in the sink's commit log."""
    return {"query": query_key(options), "batch_id": batch_id}


def batch_committed(options: SinkOptions, batch_id: int) -> bool:
    """Whether the transactional commit of `batch_id` by this query (`query_key`) is in the sink's commit log."""
    log_path = commit_log_path(options)
    with connect(options.cluster) as cluster:
        if not cluster.exists(log_path):
            return False
        return bool(cluster.lookup_rows(log_path, [commit_key(options, batch_id)]))


def commit_batch(plan: SinkPlan, parts: list[WrittenPart | None], batch_id: int) -> bool:
    """Transactional commit: staged rows + marker in one transaction, at most once per (query, batch).

    Returns False when the batch was committed before (a replay), or by another attempt while this one committed, in
    which case nothing is written.
    """
    options = plan.options
    key = commit_key(options, batch_id)
    log_path = commit_log_path(options)
    staged = [p.staging_path for p in parts if p and p.staging_path]
    with connect(options.cluster) as cluster:
        check_transaction_size(cluster, options.path, sum(p.rows for p in parts if p), batch_id)
        cluster.create(TABLE, log_path, recursive=True, ignore_existing=True,
                       attributes={"dynamic": True, "schema": COMMIT_LOG_SCHEMA})
        try:
            with cluster.transaction() as tx:
                if tx.lookup_rows(log_path, [key]):
                    log.info("sink_batch_already_committed", query=key["query"], batch_id=batch_id, path=options.path)
                    done = False
                else:
                    rows = sum(tx.publish_table(path, options.path) for path in staged)
                    tx.insert_rows(log_path, [{**key, "rows": rows, "committed_at": time.time()}])
                    done = True
        except ConflictError:
            # The lookup reads the transaction's start snapshot (YTsaurus' tablet transactions do): another attempt of
            # this batch that committed since shows only as a row lock conflict on the marker (1700) at commit.
            if not cluster.lookup_rows(log_path, [key]):
                raise
            log.info("sink_batch_committed_meanwhile", query=key["query"], batch_id=batch_id, path=options.path)
            done = False
        drop_staging(cluster, plan.staging_root)  # what it held is published now, or orphaned by a killed attempt
    return done


def publish_write(plan: SinkPlan, parts: list[WrittenPart | None], staging_root: str) -> None:
    """All-or-nothing batch write: every staged row into the target in one tablet transaction; the staging
    directory of the write is dropped whatever happens."""
    with connect(plan.options.cluster) as cluster:
        try:
            check_transaction_size(cluster, plan.options.path, sum(p.rows for p in parts if p), None)
            with cluster.transaction() as tx:
                for part in parts:
                    if part and part.staging_path:
                        tx.publish_table(part.staging_path, plan.options.path)
        finally:
            drop_staging(cluster, staging_root)


def check_transaction_size(cluster: Cluster, path: str, rows: int, batch_id: int | None) -> None:
    """Fail before writing when one micro-batch (or, with `batch_id` None, one batch write) cannot fit in
    one tablet transaction of this cluster.

    The limit holds per tablet, and every row of the commit may land on one: a sorted target's keys may all fall in
    one tablet, and YTsaurus puts an ordered table's rows that carry no `$tablet_index` on one tablet picked at random
    per table and transaction (`yt/yt/ytlib/api/native/transaction.cpp`). Splitting the commit would break its
    atomicity, so the fix is a smaller batch, which the error names.
    """
    limit = cluster.max_rows_per_tablet_transaction
    if limit is None or rows <= limit:
        return
    what, fix = (f"transactional mode commits micro-batch {batch_id}",
                 "lower max_rows_per_partition (or write without spark.yt.streaming.transactional)") \
        if batch_id is not None else ("a batch write commits all its rows", "write the DataFrame in smaller "
                                      "parts (nothing of it was written)")
    raise SchemaError(
        f"{path}: {what} in one tablet transaction, but it has {rows} rows and the cluster takes at most "
        f"{limit} rows per tablet in one transaction, all of which may land on one tablet: {fix}")


def abort_safely(path: str, cleanup: Callable[[], None]) -> bool:
    """Run an abort's `cleanup`; False when it failed, which is logged (`sink_abort_failed`), never raised.

    Spark calls an abort after the write already failed (a task's error, a stop's interruption); an abort that raises
    makes Spark report "failed to abort" over the write's own error, and, for a `foreachBatch` write, hands a
    longer failure text to the stream thread (see `streaming_core.foreach_batch`). What a failed cleanup leaves
    (a staging directory) is named in the log line; a streaming query's next commit drops its staging root.
    """
    try:
        cleanup()
    except Exception as e:  # an abort reports, it never raises: the write's own failure is what Spark must surface
        log.error("sink_abort_failed", path=path, error=f"{type(e).__name__}: {e}")
        return False
    return True


def abort_batch(plan: SinkPlan, parts: list[WrittenPart | None]) -> None:
    """Drop what the failed batch staged, the failed tasks' tables too (a query's batches run one after another, so
    nothing else is staged under its root); direct at-least-once inserts cannot be taken back (and need not be)."""
    if plan.staging_root is not None:
        with connect(plan.options.cluster) as cluster:
            drop_staging(cluster, plan.staging_root)


def drop_staging(cluster: Cluster, root: str) -> None:
    """Remove a staging directory with everything in it, and `<path>_staging` too once it is empty."""
    cluster.remove(root, recursive=True, force=True)
    parent = root.rsplit("/", 1)[0]
    if cluster.exists(parent) and cluster.get(parent + "/@type") == MAP_NODE and not cluster.list(parent):
        cluster.remove(parent, force=True)


class YtStreamWriter(DataSourceStreamArrowWriter):
    """`writeStream.format("yt")`; see the module docstring for the guarantees."""

    def __init__(self, plan: SinkPlan) -> None:
        self.plan = plan

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WrittenPart:
        """Called in a Spark worker for each partition of the micro-batch."""
        return write_rows(self.plan, iterator, self.plan.staging_root)

    def commit(self, messages: list[WrittenPart | None], batchId: int) -> None:
        """Called once per micro-batch after every task succeeded (runner process)."""
        started = time.perf_counter()
        if self.plan.options.transactional:
            commit_batch(self.plan, messages, batchId)
        elif self.plan.staging_root is not None:
            publish_write(self.plan, messages, self.plan.staging_root)
        record_batch_stats(self.plan, messages, batchId, commit_seconds=time.perf_counter() - started)

    def abort(self, messages: list[WrittenPart | None], batchId: int) -> None:
        """Called when a task of the micro-batch failed (or the query stopped during it); never raises: a failed
        cleanup is logged and counted in the batch's write statistics (`abort_failures`)."""
        path = self.plan.options.path
        cleaned = abort_safely(path, lambda: abort_batch(self.plan, messages))
        abort_safely(path, lambda: record_batch_stats(self.plan, messages, batchId, abort_failures=int(not cleaned)))


class YtBatchWriter(DataSourceArrowWriter):
    """`df.write.format("yt")` (the save mode was applied before, `streaming_core.save_modes`). Into a dynamic
    table: all or nothing; tasks stage their rows in dynBatchSize chunks below a staging directory of this
    write, the commit publishes them all at once. Into a static table: appends in dynBatchSize chunks."""

    def __init__(self, plan: SinkPlan) -> None:
        """Called when the write starts (driver side, before any task): makes the write's staging root."""
        self.plan = plan
        self.staging_root = f"{plan.options.path}_staging/write-{uuid.uuid4().hex[:16]}" \
            if plan.kind != STATIC else None
        if self.staging_root:
            with connect(plan.options.cluster) as cluster:
                cluster.create(MAP_NODE, self.staging_root, recursive=True)

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WrittenPart:
        """Called in a Spark worker for each partition of the DataFrame."""
        return write_rows(self.plan, iterator, self.staging_root, root_made=True)

    def commit(self, messages: list[WrittenPart | None]) -> None:
        """Called once in the driver after every task succeeded."""
        if self.staging_root:
            publish_write(self.plan, messages, self.staging_root)

    def abort(self, messages: list[WrittenPart | None]) -> None:
        """Called when a task failed (or a stop interrupted the write): what every task staged (failed ones too) is
        dropped, the target untouched. Never raises (`abort_safely`)."""
        if self.staging_root:
            abort_safely(self.plan.options.path, lambda: self._drop_staging(self.staging_root))

    def _drop_staging(self, root: str) -> None:
        with connect(self.plan.options.cluster) as cluster:
            drop_staging(cluster, root)
