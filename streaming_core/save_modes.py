"""Save modes of batch writes (`df.write.mode(...)`): what a batch write does to the node at its path.

| mode | nothing at the path | a static table | a dynamic table |
| --- | --- | --- | --- |
| `append` | create a static table | append | insert (today's behaviour) |
| `overwrite` | create a static table | replace it (schema from the DataFrame) | error |
| `errorifexists` (Spark's default) | create a static table | error | error |
| `ignore` | create a static table | write nothing | write nothing |

A new table takes its schema from the DataFrame (`types.yt_schema`), its keys from `sort_columns` and its
`optimize_for` from the options. Everything is checked before anything is created, replaced or written, and
a new or replacing table is published whole at the commit (`NewTableWriter`): a failed write leaves the path
as it was.

Spark hands a Python data source only `overwrite` (True for mode "overwrite") and refuses the modes
"errorifexists" and "ignore" itself (`UNSUPPORTED_DATA_SOURCE_SAVE_MODE`, PySpark 4.2) before the source
sees the write. `df.write.yt(path)` (`streaming_core.shorthands`) therefore passes the writer's mode as
the option `save_mode` and asks Spark for "append"; `df.write.format("yt")` takes the option as well.

Steps: collect (the node at the path) -> decide (`SaveDecision`, pure) -> apply (create the table to fill),
run by `batch_writer` in the driver's write planner process when the write starts; the commit publishes.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import DataSourceArrowWriter, DataSourceWriter
from pyspark.sql.types import StructType

from .cluster import AlreadyExistsError, Cluster, ClusterError, SchemaError, connect
from .cluster.base import ORDERED, SORTED, STATIC, TABLE, NodeInfo
from .log import get_logger
from .options import OPTIMIZE_FOR, UNIQUE_KEYS, SinkOptions
from .sink import SinkPlan, WrittenPart, YtBatchWriter, abort_safely, plan_sink
from .types import yt_schema

log = get_logger(__name__)

APPEND, OVERWRITE, ERROR_IF_EXISTS, IGNORE = "append", "overwrite", "errorifexists", "ignore"
#: What a batch write does to the table (see the module docstring).
CREATE, WRITE, REPLACE, SKIP = "create", "write", "replace", "skip"


@dataclass(frozen=True)
class SaveDecision:
    """The action of one batch write on `path`: create, write (into the existing table), replace or skip."""

    path: str
    mode: str
    action: str


def decide_save(path: str, mode: str, node: NodeInfo | None) -> SaveDecision:
    """Pure: the action for `mode` given the node at `path` (None: nothing there). Errors name path and mode."""
    if node is None:
        return SaveDecision(path, mode, CREATE)
    if node.kind is None:
        raise SchemaError(f"{path}: is a {node.type}, not a table; a batch write needs a table or a free path")
    if mode == ERROR_IF_EXISTS:
        raise AlreadyExistsError(
            f"{path}: already exists and the save mode is {ERROR_IF_EXISTS} (Spark's default); write with "
            f"mode('append') to add rows or mode('overwrite') to replace a static table")
    if mode == IGNORE:
        return SaveDecision(path, mode, SKIP)
    if mode == OVERWRITE:
        if node.kind != STATIC:
            raise SchemaError(f"{path}: save mode {OVERWRITE} replaces static tables only, and this is a "
                              f"{node.kind} table; write with mode('append') (inserts rows)")
        return SaveDecision(path, mode, REPLACE)
    return SaveDecision(path, mode, WRITE)


def new_table_attributes(options: SinkOptions, df_schema: StructType) -> dict[str, Any]:
    """The attributes of a static table made for this DataFrame; `SchemaError` names what cannot be made."""
    if options.unique_keys:
        raise SchemaError(f"{options.path}: option {UNIQUE_KEYS!r} is not supported yet; leave it false")
    try:
        schema = yt_schema(df_schema, type_v3=options.write_type_v3, sort_columns=options.sort_columns)
    except SchemaError as e:
        raise SchemaError(f"{options.path}: cannot make a table for the DataFrame: {e}") from None
    attributes: dict[str, Any] = {"schema": schema}
    if options.optimize_for:
        attributes[OPTIMIZE_FOR] = options.optimize_for
    return attributes


def collect_node(cluster: Cluster, path: str) -> NodeInfo | None:
    return cluster.node_info(path) if cluster.exists(path) else None


def new_table_path(path: str) -> str:
    """Where a new (or replacing) table is written before the commit moves it to `path`."""
    return f"{path}.writing-{uuid.uuid4().hex[:12]}"


def apply_save(cluster: Cluster, decision: SaveDecision, attributes: dict[str, Any]) -> str | None:
    """Create the table the tasks fill when the save makes one, beside `path`; returns its path (None when
    the tasks write to the existing table)."""
    if decision.action not in (CREATE, REPLACE):
        return None
    path = new_table_path(decision.path)
    cluster.create(TABLE, path, recursive=True, attributes=attributes)
    return path


def batch_writer(options: SinkOptions, df_schema: StructType, *, overwrite: bool) -> DataSourceWriter:
    """Called when `df.write.format("yt")` starts (driver): apply the save mode, then plan the writes.

    `overwrite` is Spark's flag; the option `save_mode`, when given, says more and wins.
    """
    mode = options.save_mode or (OVERWRITE if overwrite else APPEND)
    with connect(options.cluster) as cluster:
        decision = decide_save(options.path, mode, collect_node(cluster, options.path))
        if decision.action == SKIP:
            log.info("batch_write_skipped", path=options.path, mode=mode, reason="table_exists")
            return SkippedWrite()
        attributes = new_table_attributes(options, df_schema) if decision.action in (CREATE, REPLACE) else {}
        new_path = apply_save(cluster, decision, attributes)
    if new_path is None:
        return YtBatchWriter(plan_sink(options, df_schema, overwrite=False, kinds=(ORDERED, SORTED, STATIC)))
    plan = plan_sink(dataclasses.replace(options, path=new_path), df_schema, overwrite=False, kinds=(STATIC,))
    return NewTableWriter(plan, decision)


class NewTableWriter(YtBatchWriter):
    """A new or replacing static table, published whole: the tasks fill a fresh table beside the path, the
    commit moves it onto the path in one step (replacing the old table in `overwrite`), an abort drops it.
    A failed write leaves the path as it was.

    Notes
    -----
    `commit` / `abort` run in a driver-side Python process on an unpickled copy.
    """

    def __init__(self, plan: SinkPlan, decision: SaveDecision) -> None:
        super().__init__(plan)
        self.decision = decision

    def commit(self, messages: list[WrittenPart | None]) -> None:
        written = self.plan.options.path
        with connect(self.plan.options.cluster) as cluster:
            try:
                cluster.move(written, self.decision.path, force=self.decision.action == REPLACE)
            except ClusterError:
                cluster.remove(written, force=True)
                raise
        log.info("static_table_published", path=self.decision.path, mode=self.decision.mode,
                 replaced=self.decision.action == REPLACE, rows=sum(m.rows for m in messages if m))

    def abort(self, messages: list[WrittenPart | None]) -> None:
        """The table being filled is dropped; never raises (`streaming_core.sink.abort_safely`)."""
        abort_safely(self.plan.options.path, self._drop_new_table)

    def _drop_new_table(self) -> None:
        with connect(self.plan.options.cluster) as cluster:
            cluster.remove(self.plan.options.path, force=True)


class SkippedWrite(DataSourceArrowWriter):
    """Save mode `ignore` on an existing table: the tasks write nothing."""

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WrittenPart:
        return WrittenPart(rows=0)
