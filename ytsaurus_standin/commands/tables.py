"""The row commands of the stand-in: queues, sorted and static tables."""


from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import yt.yson as yson

from streaming_core.cluster.base import ORDERED, PULL_ROWS, READ_BATCH_BYTES, SORTED, Cluster
from streaming_core.cluster.errors import NoSuchPathError
from streaming_core.cluster.schema import ROW_INDEX, TABLET_INDEX, TableSchema, to_arrow_table
from streaming_core.cluster.yson_values import plain

from .. import query as ql
from ..acl import READ
from ..errors import GENERIC, NO_SUCH_TABLET, BadRequest, YtCodedError
from .common import (
    Rows,
    Rowset,
    Tabular,
    attributes_of,
    check_write_schema,
    hybrid_timestamps,
    input_table,
    key_schema,
    path_of,
    selected,
    wire_rows,
)

#: Rows of one ordered store of the stand-in's queues: a pull answers from one store at most, as YTsaurus' does.
PULL_STORE_ROWS = 10_000


def pull_bounds(p: Mapping[str, Any]) -> tuple[int, int]:
    """A pull's `max_row_count` and `max_data_weight` (defaults 1000 rows and 16 MiB); a non-positive one is refused,
    as YTsaurus refuses it (`queue_rowset.cpp`)."""
    bounds = []
    for name, default in (("max_row_count", PULL_ROWS), ("max_data_weight", READ_BATCH_BYTES)):
        value = default if p.get(name) is None else int(p[name])
        if value <= 0:
            raise YtCodedError(GENERIC, f"{name} must be positive, got {value}")
        bounds.append(value)
    return bounds[0], bounds[1]


def _sortable(key: tuple[Any, ...]) -> tuple[tuple[bool, Any], ...]:
    """A key to sort sorted-table keys by, nulls first (as YTsaurus orders them)."""
    return tuple((value is not None, value) for value in key)


class TableCommands:
    """Rows: tablet counters, trimming, selects, lookups, inserts and deletes, pulls, static tables and files."""

    def get_tablet_infos(self, p: Mapping[str, Any]) -> Any:
        self.tablet_states.require_cells(path_of(p))
        infos = self.cluster.get_tablet_infos(path_of(p))
        wanted = [int(i) for i in p.get("tablet_indexes") or range(len(infos))]
        for index in wanted:
            if not 0 <= index < len(infos):  # the mount info's words (`TTableMountInfo::GetTabletByIndexOrThrow`)
                raise YtCodedError(NO_SUCH_TABLET, f"Invalid tablet index for table {path_of(p)}: expected in range "
                                                   f"[0,{len(infos) - 1}], got {index}")
        return {"tablets": [{"total_row_count": infos[i].total_row_count,
                             "trimmed_row_count": infos[i].trimmed_row_count,
                             "barrier_timestamp": 0, "last_write_timestamp": 0} for i in wanted]}

    def trim_rows(self, p: Mapping[str, Any]) -> None:
        """The trimmed row count moves at once; the trimmed rows' chunks are detached later (`TabletStates`)."""
        path, tablet = path_of(p), int(p["tablet_index"])
        self.cluster._trim_rows(path, tablet, int(p["trimmed_row_count"]))
        self.tablet_states.trimmed_chunks_attached(path, tablet, self.cluster.get_tablet_infos(path)[tablet]
                                                   .trimmed_row_count)

    def select_rows(self, p: Mapping[str, Any]) -> Rowset:
        try:
            q = ql.parse(str(p["query"]))
        except ql.QueryError as e:
            raise BadRequest(str(e)) from None
        self.permissions.require(READ, q.path)
        info = self.cluster.node_info(q.path)
        self._require_mounted(q.path)
        schema = TableSchema.from_yt(info.attributes["schema"])
        start = self.snapshot_start(p)
        if info.kind == ORDERED:
            tables: Iterable[pa.Table] = self._queue_rows(q, start)
        elif info.kind == SORTED:
            rows = self.snapshot_rows(start, q.path, schema.key_columns, self.cluster.select_rows(q.path))
            tables = [to_arrow_table(schema, [rows[k] for k in sorted(rows, key=_sortable)], q.path)]
        else:
            raise BadRequest(f"{q.path}: select_rows reads dynamic tables; this one is static")
        return Rowset(schema, (selected(hybrid_timestamps(t), q) for t in tables))

    def _queue_rows(self, q: ql.Query, start: int | None) -> Iterator[pa.Table]:
        """The queue's rows the query selects, as they stood at commit version `start` (None: now)."""
        infos = self.cluster.get_tablet_infos(q.path)
        tablet = q.equal(TABLET_INDEX)
        bounds = q.bounds(ROW_INDEX) or (0, float("inf"))
        picked = q.among(ROW_INDEX)
        for info in infos if tablet is None else infos[int(tablet):int(tablet) + 1]:
            total = self.snapshot_row_count(start, q.path, info.tablet_index, info.total_row_count)
            if picked is not None:  # single rows (the source's byte cap probes them), not the range between
                rows = self.cluster.read_rows_at(q.path, info.tablet_index, [int(r) for r in picked if int(r) < total])
                yield rows.add_column(0, TABLET_INDEX, pa.repeat(pa.scalar(info.tablet_index, pa.int64()),
                                                                 rows.num_rows))
                continue
            lower = max(info.trimmed_row_count, int(bounds[0]))
            upper = min(total, bounds[1] + 1)
            if lower < upper:
                for batch in self.cluster.read_tablet(q.path, info.tablet_index, lower, int(upper),
                                                      service_columns=True):
                    yield pa.Table.from_batches([batch])

    def lookup_rows(self, p: Mapping[str, Any], rows: Rows) -> Rowset:
        """The rows of `rows`' keys, at the snapshot of the request's tablet transaction (its start) when it names
        one, as YTsaurus reads them."""
        path = path_of(p)
        schema = self.cluster.get_schema(path)
        keys = input_table(key_schema(schema), rows).to_pylist()
        found = self.snapshot_rows(self.snapshot_start(p), path, schema.key_columns,
                                   self.cluster.lookup_rows(path, keys))
        wanted = (found.get(tuple(key[c] for c in schema.key_columns)) for key in keys)
        return Rowset(schema, [to_arrow_table(schema, [row for row in wanted if row is not None], path)])

    def insert_rows(self, p: Mapping[str, Any], rows: Rows | pa.Table) -> None:
        """Rows parsed against the table's write schema (`TableSchema.writable`), as YTsaurus parses them: a YSON or
        JSON row with a key the write schema lacks (`$timestamp`, `$cumulative_data_weight`, a computed column, an
        unknown name) is refused with `SCHEMA_VIOLATION` (the `arrow` input drops such columns itself)."""
        path = path_of(p)
        self._require_mounted(path)
        schema = self.cluster.get_schema(path)
        if not isinstance(rows, pa.Table):
            check_write_schema(schema, rows, ordered=not schema.key_columns)
        table = input_table(schema, rows)
        if TABLET_INDEX in table.column_names:
            tablets = table.column(TABLET_INDEX)
            table = table.drop_columns([TABLET_INDEX])
            groups = [(int(t), table.filter(pc.equal(tablets, t))) for t in pc.unique(tablets).to_pylist()]
        else:
            groups = [(None, table)]

        def write(tx: Any) -> None:
            for tablet, group in groups:
                tx.insert_rows(path, group, tablet_index=tablet)

        self._tablet_write(p, write)

    def delete_rows(self, p: Mapping[str, Any], rows: Rows) -> None:
        path = path_of(p)
        keys = input_table(key_schema(self.cluster.get_schema(path)), rows).to_pylist()
        self._tablet_write(p, lambda tx: tx.delete_rows(path, keys))

    def pull_consumer(self, p: Mapping[str, Any]) -> Rowset:
        """Rows of one partition from the consumer's offset (or `offset`): from the first untrimmed row when it is
        below the trim, nothing past the end, and at most one ordered store (`PULL_STORE_ROWS` here) per answer,
        as YTsaurus reads (`queue_rowset.cpp`): a short answer is normal."""
        queue = str(p["queue_path"])
        self._require_mounted(queue)
        self.require_visible_registration(queue, str(p["consumer_path"]))
        offset = None if p.get("offset") is None else int(p["offset"])
        rows, data_weight = pull_bounds(p)
        table = self.cluster.pull_consumer(
            str(p["consumer_path"]), queue, offset, int(p["partition_index"]),
            max_row_count=rows, max_data_weight=data_weight)
        if table.num_rows:
            first = table.column(ROW_INDEX)[0].as_py()
            table = table.slice(0, PULL_STORE_ROWS - first % PULL_STORE_ROWS)
        return Rowset(self.cluster.get_schema(queue), [hybrid_timestamps(table)])

    def pull_queue(self, p: Mapping[str, Any]) -> Rowset:
        queue, tablet = str(p["queue_path"]), int(p["partition_index"])
        self._require_mounted(queue)
        info = self.cluster.get_tablet_infos(queue)[tablet]
        lower = max(int(p["offset"]), info.trimmed_row_count)
        upper = min(info.total_row_count, lower + pull_bounds(p)[0], (lower // PULL_STORE_ROWS + 1) * PULL_STORE_ROWS)
        batches = self.cluster.read_tablet(queue, tablet, lower, upper, service_columns=True) if lower < upper else []
        return Rowset(self.cluster.get_schema(queue), (hybrid_timestamps(pa.Table.from_batches([b])) for b in batches))

    def read_table(self, p: Mapping[str, Any]) -> Tabular:
        """Rows of the path's first row range (`<ranges=[{lower_limit={row_index=...}}]>`, as retries resume), with
        the response parameters the reader resumes by and, when asked, the row and range index control rows."""
        path = path_of(p)
        schema = self.cluster.get_schema(path)
        ranges = plain(attributes_of(p["path"]).get("ranges") or [{}])
        if len(ranges) != 1:
            raise BadRequest(f"{path}: the stand-in reads one row range at a time")
        total = int(self.cluster.get(path + "/@row_count"))
        lower = int(((ranges[0].get("lower_limit") or {}).get("row_index")) or 0)
        upper = min(total, int(((ranges[0].get("upper_limit") or {}).get("row_index")) or total))
        control = plain(p.get("control_attributes") or {})

        def rows() -> Iterator[Any]:
            if control.get("enable_range_index") or control.get("enable_row_index"):
                marker = yson.YsonEntity()
                marker.attributes = {**({"range_index": 0} if control.get("enable_range_index") else {}),
                                     **({"row_index": lower} if control.get("enable_row_index") else {})}
                yield marker
            done = 0
            for batch in self.cluster.read_table(path):
                start, stop = max(lower - done, 0), min(upper - done, batch.num_rows)
                if start < stop:
                    yield from wire_rows(schema, pa.Table.from_batches([batch.slice(start, stop - start)]))
                done += batch.num_rows

        return Tabular(rows(), {"start_row_index": lower, "approximate_row_count": max(upper - lower, 0)})

    def write_table(self, p: Mapping[str, Any], rows: Rows) -> None:
        path = path_of(p)
        append = bool(attributes_of(p["path"]).get("append", False))
        table = input_table(self.cluster.get_schema(path), rows)
        self._master_write(p, lambda cluster: cluster.write_table(path, table, append=append))

    def read_file(self, p: Mapping[str, Any]) -> bytes:
        disk = self._disk(path_of(p))
        if disk is None or not disk.is_file():
            raise NoSuchPathError(f"{path_of(p)}: no such file")
        return disk.read_bytes()

    def write_file(self, p: Mapping[str, Any], data: bytes) -> None:
        target = self._disk_path(path_of(p))
        append = bool(attributes_of(p["path"]).get("append", False))

        def write(_: Cluster) -> None:
            target.parent.mkdir(parents=True, exist_ok=True)
            with target.open("ab" if append else "wb") as out:
                out.write(data)

        self._master_write(p, write)

