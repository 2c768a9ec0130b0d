"""Ordered dynamic tables (queues) over YTsaurus: tablet counters, bounded range reads, trimming and resharding.

A reshard unmounts the table for a moment; tablet counters asked for meanwhile (a running query plans its next batch)
wait for the mount, for at most the client's retry bound, as the client itself waits in its reads and writes.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager
from typing import Any, TypeVar

import pyarrow as pa
from yt.common import YtError

from ...log import get_logger
from ..base import MAX_TABLET_COUNT, ORDERED, READ_BATCH_BYTES, READ_BATCH_ROWS, TabletInfo, require_kind
from ..errors import AccessDeniedError, ClusterError, NoSuchPathError, TrimmedRowsError
from ..schema import ROW_INDEX, TABLET_INDEX, TableSchema
from . import query as query_names
from .client import WIRE_RAW, retry_seconds
from .rows import split_batches
from .wire import SERVICE_COLUMNS, decode_wire

#: The Queue Agent's dynamic config document.
QUEUE_AGENT_CONFIG = "//sys/queue_agents/config"
#: How often tablet counters are asked for again while a table's tablets are unmounted or changing.
TABLETS_MOVING_POLL_SECONDS = 0.2

T = TypeVar("T")
log = get_logger(__name__)


def tablets_moving(err: YtError) -> bool:
    """A YTsaurus error of tablets being unmounted, resharded or mounted: it passes."""
    return err.is_tablet_not_mounted() or err.is_no_such_tablet() or err.is_tablet_in_intermediate_state()


def chunks_not_trimmed(err: YtError) -> bool:
    """YTsaurus' refusal to reshard away a tablet whose trimmed rows' chunks are still attached (`tablet.cpp`
    `ValidateReshardRemove`, no code of its own): it passes once the tablet node has detached them."""
    return bool(err.find_matching_error(predicate=lambda e: "are not fully trimmed" in e.message))


def tablet_count_from_mount_info(client: Any, path: str) -> int:
    """A table's tablet count without read on it: `get_tablet_infos` of an index past any table's is refused with
    the count in its message, "Invalid tablet index for table ...: expected in range [0,N-1], got ..."
    (`yt/yt/client/tablet_client/table_mount_cache.cpp`, `GetTabletByIndexOrThrow`)."""
    try:
        client.get_tablet_infos(path, [MAX_TABLET_COUNT])
    except YtError as err:
        refusal = err.find_matching_error(predicate=lambda e: "Invalid tablet index" in e.message)
        found = refusal and re.search(r"expected in range \[0,\s*(-?\d+)\]", refusal.message)
        if not found:
            raise
        return int(found.group(1)) + 1
    raise ClusterError(f"{path}: tablet {MAX_TABLET_COUNT} is past YTsaurus' limit, yet was answered")


class QueueMixin:
    """`get_tablet_infos`, `read_tablet`, `trim_rows` and `reshard` of `YtsaurusCluster` (appends: `insert_rows`)."""

    _client: Any
    _errors: Callable[[str], AbstractContextManager[None]]
    _while_registration_is_fresh: Callable[..., Any]  # `ConsumerMixin`'s

    def get_tablet_infos(self, path: str) -> list[TabletInfo]:
        """The tablets' counters. `get_tablet_infos` checks no permission, but the tablet count (`@tablet_count`) needs
        read on the table: a reader granted the queue through its consumer only learns it from the mount info's
        refusal of a tablet index past any table's (`tablet_count_from_mount_info`)."""
        try:
            count = self._tablet_count(path)
        except NoSuchPathError:
            require_kind(self, path, ORDERED)  # a table of another kind is named as such; else the path is missing
            raise
        counts = [count]  # the count read above; on a retry (a reshard meanwhile) the table's own again

        def infos_now() -> list[Any]:
            tablets = counts.pop() if counts else self._tablet_count(path)
            return self._client.get_tablet_infos(path, list(range(tablets)))["tablets"]

        infos = self._while_tablets_move(path, infos_now)
        return [
            TabletInfo(tablet_index=i, total_row_count=int(info["total_row_count"]),
                       trimmed_row_count=int(info["trimmed_row_count"]))
            for i, info in enumerate(infos)
        ]

    def _tablet_count(self, path: str) -> int:
        try:
            return int(self.get(path + "/@tablet_count"))
        except AccessDeniedError:
            with self._errors(path):
                return tablet_count_from_mount_info(self._client, path)

    def queue_agent_attribute(self, path: str, name: str) -> Any | None:
        """The Queue Agent's attribute (see `Cluster.queue_agent_attribute`); None where the cluster resolves no such
        attribute (no Queue Agent). An object the agent watches but cannot judge comes back as `{"error": ...}`."""
        try:
            return self.get(f"{path}/@{name}")
        except NoSuchPathError:
            return None

    def automatic_trimming(self) -> bool | None:
        """`queue_agent/controller/enable_automatic_trimming` of the Queue Agent's dynamic config
        (`QUEUE_AGENT_CONFIG`; absent: the default, off, `yt/yt/server/queue_agent/config.cpp`); None when the
        document cannot be read."""
        try:
            config = self.get(QUEUE_AGENT_CONFIG)
        except NoSuchPathError:
            return False
        except ClusterError as e:
            log.info("queue_agent_config_unreadable", path=QUEUE_AGENT_CONFIG, error=str(e))
            return None
        controller = ((config or {}).get("queue_agent") or {}).get("controller") or {}
        return controller.get("enable_automatic_trimming") is True

    def read_tablet(
        self, path: str, tablet_index: int, lower: int, upper: int, *,
        columns: Sequence[str] | None = None, max_rows: int = READ_BATCH_ROWS,
        max_bytes: int = READ_BATCH_BYTES, service_columns: bool = False, consumer_path: str | None = None,
        schema: TableSchema | None = None,
    ) -> Iterator[pa.RecordBatch]:
        """Read in calls of at most `max_rows` rows (and `max_bytes`, through a consumer), so no response is
        unbounded: through `consumer_path` with `pull_consumer` (read access to the consumer and its registration,
        as SPYT reads), else with `select_rows` (read access to the queue table). Every response must start at the
        row asked for and be contiguous: a gap is rows trimmed meanwhile. With `schema` given, the queue's
        `@schema` is not read (a reader granted the queue through its consumer only may not read it)."""
        schema = schema or self.get_schema(path)
        if columns is not None:
            schema = TableSchema(tuple(schema.column(c) for c in columns))
        self._check_range(path, tablet_index, lower, upper)
        start = lower
        while start < upper:
            stop = min(start + max_rows, upper)
            if consumer_path is None:
                rows = self._select_range(path, schema, tablet_index, start, stop)
            else:
                rows = self._pull_range(consumer_path, path, schema, tablet_index, start, stop, max_bytes)
            if rows.num_rows == 0:  # every row of the call trimmed meanwhile, or a tablet that lost rows
                self._check_range(path, tablet_index, start, upper)
                raise ClusterError(f"{path}: partition {tablet_index}: rows [{start}, {upper}) were not returned")
            first = rows.column(ROW_INDEX)[0].as_py()
            if first != start:
                raise TrimmedRowsError.of(path, tablet_index, lower, upper, first)
            rows = rows.slice(0, stop - start)
            yield from split_batches(rows if service_columns else rows.drop_columns(list(SERVICE_COLUMNS)), max_bytes)
            start += rows.num_rows

    def read_rows_at(self, path: str, tablet_index: int, row_indexes: Sequence[int], *,
                     columns: Sequence[str] | None = None) -> pa.Table:
        schema = self.get_schema(path)
        if columns is not None:
            schema = TableSchema(tuple(schema.column(c) for c in columns))
        rows = sorted({int(r) for r in row_indexes})
        if not rows:
            return decode_wire(schema, b"", service_columns=[ROW_INDEX])
        names = ", ".join(query_names.column(n) for n in [ROW_INDEX, *schema.names])
        query = (f"{names} FROM {query_names.table(path)} WHERE [{TABLET_INDEX}] = {int(tablet_index)}"
                 f" AND [{ROW_INDEX}] IN ({', '.join(map(str, rows))})")
        with self._errors(path):
            raw = self._client.select_rows(query, **WIRE_RAW).read()
        return decode_wire(schema, raw, service_columns=[ROW_INDEX]).sort_by(ROW_INDEX)

    def _pull_range(
        self, consumer_path: str, path: str, schema: TableSchema, tablet_index: int, start: int, stop: int,
        max_bytes: int,
    ) -> pa.Table:
        with self._errors(f"{path} <- {consumer_path}, partition {tablet_index}"):
            raw = self._while_registration_is_fresh(path, consumer_path, lambda: self._client.pull_consumer(
                consumer_path, path, start, tablet_index, max_row_count=stop - start, max_data_weight=max_bytes,
                **WIRE_RAW).read())
        return decode_wire(schema, raw, service_columns=True)

    def _check_range(self, path: str, tablet_index: int, lower: int, upper: int) -> None:
        """`ClusterError` for a tablet or rows the queue does not have, `TrimmedRowsError` for trimmed ones."""
        infos = self.get_tablet_infos(path)
        if not 0 <= tablet_index < len(infos):
            raise ClusterError(f"{path}: no tablet {tablet_index} (the queue has {len(infos)})")
        total, trimmed = infos[tablet_index].total_row_count, infos[tablet_index].trimmed_row_count
        if lower > upper or upper > total:
            raise ClusterError(f"{path}: tablet {tablet_index} has rows [{trimmed}, {total}); "
                               f"cannot read [{lower}, {upper})")
        if lower < trimmed and lower < upper:
            raise TrimmedRowsError.of(path, tablet_index, lower, upper, trimmed)

    def _select_range(self, path: str, schema: TableSchema, tablet_index: int, start: int, stop: int) -> pa.Table:
        names = ", ".join(query_names.column(n) for n in [TABLET_INDEX, ROW_INDEX, *schema.names])
        query = (f"{names} FROM {query_names.table(path)} WHERE [{TABLET_INDEX}] = {int(tablet_index)}"
                 f" AND [{ROW_INDEX}] BETWEEN {int(start)} AND {int(stop) - 1}")
        with self._errors(path):
            raw = self._client.select_rows(query, **WIRE_RAW).read()
        return decode_wire(schema, raw, service_columns=True).sort_by(ROW_INDEX)

    def _trim_rows(self, path: str, tablet_index: int, trimmed_row_count: int) -> None:
        """Trim, skipping the call when the tablet is already trimmed that far (never backwards)."""
        if self.get_tablet_infos(path)[tablet_index].trimmed_row_count >= trimmed_row_count:
            return
        with self._errors(path):
            self._client.trim_rows(path, tablet_index, trimmed_row_count)

    def _while_tablets_move(self, path: str, call: Callable[[], T]) -> T:
        """`call()`, tried again while the table's tablets are unmounted or changing, for at most the client's retry
        bound (`OPSD_YT_RETRY_SECONDS`); other errors, and the last one, as ours. Moving tablets are told by the
        error (`tablets_moving`) or, since `get_tablet_infos` of an unmounted table fails with a generic error (it
        asks the tablets' cells, `client_dynamic_tables_impl.cpp`), by `@tablet_state`."""
        deadline = time.monotonic() + retry_seconds()
        with self._errors(path):
            while True:
                try:
                    return call()
                except YtError as err:
                    if time.monotonic() >= deadline or not (tablets_moving(err) or self._not_mounted(path)):
                        raise
                time.sleep(TABLETS_MOVING_POLL_SECONDS)

    def _not_mounted(self, path: str) -> bool:
        """Whether the table's `@tablet_state` is anything but `mounted` (False when it cannot be read)."""
        try:
            return str(self._client.get(f"{path}/@tablet_state")) != "mounted"
        except YtError:
            return False

    def _reshard(self, path: str, tablet_count: int) -> None:
        """Unmount, `reshard_table` with `tablet_count`, mount, each waited for: YTsaurus reshards unmounted tablets
        only. The table is mounted again even when the reshard fails, so a refused reshard leaves it usable.

        A tablet it removes is refused while the chunks of its trimmed rows are still attached (the tablet node
        detaches them after a trim, while mounted: `chunks_not_trimmed`): the reshard is tried again, the table
        mounted meanwhile, for at most the client's retry bound."""
        deadline = time.monotonic() + retry_seconds()
        waiting = False
        while True:
            with self._errors(path):
                self._client.unmount_table(path, sync=True)
                try:
                    self._client.reshard_table(path, tablet_count=tablet_count, sync=True)
                    return
                except YtError as err:
                    if not chunks_not_trimmed(err) or time.monotonic() >= deadline:
                        raise
                finally:
                    self._client.mount_table(path, sync=True)
            if not waiting:
                waiting = True
                log.info("yt_reshard_waiting_for_trimmed_chunks", path=path, tablet_count=tablet_count,
                         at_most_seconds=retry_seconds(),
                         reason="YTsaurus detaches a trimmed tablet's chunks after the trim, while it is mounted")
            time.sleep(TABLETS_MOVING_POLL_SECONDS)
