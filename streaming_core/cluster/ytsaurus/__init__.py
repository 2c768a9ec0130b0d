"""`YtsaurusCluster`: the cluster interface over a real YTsaurus cluster, through `ytsaurus-client`.

Every method is one or a few `yt.wrapper` calls with the same names; this module adds what the
interface promises on top of YTsaurus: rows validated against the table schema before anything is sent
(so a bad row writes nothing), Arrow in and out, YT errors mapped to `errors.py`, bounded reads, and a
tablet transaction whose lookups see its own writes (YTsaurus lookups read a snapshot, not the
transaction's writes).

Rows cross as YSON in one explicit format, `rows.WIRE_FORMAT`, passed to every call that carries
rows; `rows` converts values between Arrow and that format, type by type.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

import pyarrow as pa
import yt.wrapper as yt
from yt.common import YtError

from ..base import (
    DEFAULT_CHUNK_BYTES,
    DEFAULT_CHUNK_ROWS,
    ORDERED,
    ROWS,
    SORTED,
    STATIC,
    TABLE,
    Cluster,
    Registration,
    TabletInfo,
    Transaction,
    require_kind,
)
from ..errors import (
    AlreadyExistsError,
    ClusterError,
    ConflictError,
    NoSuchPathError,
    NotRegisteredError,
    TrimmedRowsError,
)
from ..schema import CONSUMER_SCHEMA, ROW_INDEX, TABLET_INDEX, TableSchema, to_arrow_table
from .rows import (
    WIRE_FORMAT,
    PreparedRows,
    as_list_or_table,
    from_yt_rows,
    key_schema,
    plain,
    prepare_insert,
    registration,
    sort_key,
    split_batches,
    to_yt_rows,
)

_CODE_CONSUMER_OFFSET_CONFLICT = 3100
_CODE_AUTHORIZATION_ERROR = 901
#: The keyword arguments of every `yt.wrapper` call that sends or returns rows: Python rows, in `WIRE_FORMAT`.
_WIRE = {"format": WIRE_FORMAT, "raw": False}

ClientFactory = Callable[[str, str | None, dict[str, Any] | None], Any]


def default_client_factory(proxy: str, token: str | None, config: dict[str, Any] | None) -> yt.YtClient:
    """A real `YtClient`; tests pass a fake factory instead."""
    return yt.YtClient(proxy=proxy, token=token, config=config)


class YtsaurusCluster(Cluster):
    """The cluster at `proxy` (`hahn`, `localhost:8000`), with `token` or `$YT_TOKEN`.

    Notes
    -----
    Picklable: only proxy, token and client config are pickled; the `YtClient` is created on first use
    in each process, which is what lets Spark ship readers holding a cluster to its workers.
    The token never appears in `repr()` nor in the messages of raised errors.
    """

    max_rows_per_tablet_transaction = 100_000

    def __init__(
        self, proxy: str, *, token: str | None = None, config: dict[str, Any] | None = None,
        client_factory: ClientFactory = default_client_factory,
    ) -> None:
        self.proxy = proxy
        self.uri = f"yt://{proxy}"
        self._token = token or os.environ.get("YT_TOKEN")
        self._config = config
        self._client_factory = client_factory
        self._client_instance: Any = None
        self._name: str | None = None

    def __repr__(self) -> str:
        return f"YtsaurusCluster(proxy={self.proxy!r})"

    def __getstate__(self) -> dict[str, Any]:
        return {"proxy": self.proxy, "token": self._token, "config": self._config}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["proxy"], token=state["token"], config=state["config"])

    @property
    def _client(self) -> Any:
        if self._client_instance is None:
            self._client_instance = self._new_client()
        return self._client_instance

    def _new_client(self) -> Any:
        return self._client_factory(self.proxy, self._token, self._config)

    @property
    def name(self) -> str:  # type: ignore[override]
        """`//sys/@cluster_name` (what YTsaurus writes as `queue_cluster`), else the proxy."""
        if self._name is None:
            try:
                with self._errors("//sys/@cluster_name"):
                    self._name = str(self._client.get("//sys/@cluster_name"))
            except NoSuchPathError:
                self._name = self.proxy
        return self._name

    def close(self) -> None:
        self._client_instance = None

    @contextmanager
    def _errors(self, what: str) -> Iterator[None]:
        """Re-raise `yt.wrapper` errors as ours, the message naming `what` and free of the token."""
        try:
            yield
        except YtError as err:
            raise translate_error(err, what, self._token) from None

    # -- path tree --------------------------------------------------------------------------------

    def exists(self, path: str) -> bool:
        with self._errors(path):
            return bool(self._client.exists(path))

    def create(
        self, node_type: str, path: str, *, recursive: bool = False, ignore_existing: bool = False,
        attributes: Mapping[str, Any] | None = None,
    ) -> None:
        """Create a node; a dynamic table is also mounted and waited for, so it is usable on return."""
        attrs = dict(attributes or {})
        if "schema" in attrs:
            attrs["schema"] = TableSchema.from_yt(attrs["schema"]).to_yt()
        with self._errors(path):
            self._client.create(node_type, path, recursive=recursive, ignore_existing=ignore_existing,
                                attributes=attrs)
            if node_type == TABLE and attrs.get("dynamic"):
                self._client.mount_table(path, sync=True)

    def remove(self, path: str, *, recursive: bool = False, force: bool = False) -> None:
        with self._errors(path):
            self._client.remove(path, recursive=recursive, force=force)

    def list(self, path: str) -> list[str]:
        with self._errors(path):
            return sorted(str(name) for name in self._client.list(path))

    def get(self, path: str) -> Any:
        with self._errors(path):
            return plain(self._client.get(path))

    def set(self, path: str, value: Any) -> None:
        with self._errors(path):
            self._client.set(path, value)

    # -- ordered dynamic tables (queues) ----------------------------------------------------------

    def insert_rows(self, path: str, rows: ROWS, *, tablet_index: int | None = None) -> None:
        prepared = self._prepare_insert(path, rows, tablet_index)
        with self._errors(path):
            self._client.insert_rows(path, prepared.yt_rows, **_WIRE)

    def _prepare_insert(self, path: str, rows: ROWS, tablet_index: int | None) -> PreparedRows:
        """Validate and convert rows for `insert_rows`, before any write: bad rows raise here."""
        return prepare_insert(path, require_kind(self, path, ORDERED, SORTED), rows, tablet_index)

    def get_tablet_infos(self, path: str) -> list[TabletInfo]:
        count = int(self.get(path + "/@tablet_count"))
        with self._errors(path):
            infos = self._client.get_tablet_infos(path, list(range(count)))["tablets"]
        return [
            TabletInfo(tablet_index=i, total_row_count=int(info["total_row_count"]),
                       trimmed_row_count=int(info["trimmed_row_count"]))
            for i, info in enumerate(infos)
        ]

    def read_tablet(
        self, path: str, tablet_index: int, lower: int, upper: int, *,
        columns: Sequence[str] | None = None, max_rows: int = DEFAULT_CHUNK_ROWS,
        max_bytes: int = DEFAULT_CHUNK_BYTES, service_columns: bool = False,
    ) -> Iterator[pa.RecordBatch]:
        """Read with `select_rows` over row-index ranges of `max_rows`, so no response is unbounded."""
        schema = self.get_schema(path)
        if columns is not None:
            schema = TableSchema(tuple(schema.column(c) for c in columns))
        self._check_not_trimmed(path, tablet_index, lower, upper)
        for start in range(lower, upper, max_rows):
            stop = min(start + max_rows, upper)
            rows = self._select_range(path, schema, tablet_index, start, stop)
            if rows and int(rows[0][ROW_INDEX]) != start:
                raise _trimmed(path, tablet_index, lower, upper, int(rows[0][ROW_INDEX]))
            table = from_yt_rows(schema, rows, service_columns=service_columns)
            yield from split_batches(table, max_bytes)
            if len(rows) < stop - start:
                return

    def _check_not_trimmed(self, path: str, tablet_index: int, lower: int, upper: int) -> None:
        trimmed = self.get_tablet_infos(path)[tablet_index].trimmed_row_count
        if lower < trimmed and lower < upper:
            raise _trimmed(path, tablet_index, lower, upper, trimmed)

    def _select_range(
        self, path: str, schema: TableSchema, tablet_index: int, start: int, stop: int,
    ) -> list[dict[str, Any]]:
        names = ", ".join(f"[{n}]" for n in [TABLET_INDEX, ROW_INDEX, *schema.names])
        query = (f"{names} FROM [{path}] WHERE [{TABLET_INDEX}] = {int(tablet_index)}"
                 f" AND [{ROW_INDEX}] BETWEEN {int(start)} AND {int(stop) - 1}")
        with self._errors(path):
            rows = list(self._client.select_rows(query, **_WIRE))
        return sorted(rows, key=lambda r: int(r[ROW_INDEX]))

    def trim_rows(self, path: str, tablet_index: int, trimmed_row_count: int) -> None:
        """Trim, skipping the call when the tablet is already trimmed that far (never backwards)."""
        if self.get_tablet_infos(path)[tablet_index].trimmed_row_count >= trimmed_row_count:
            return
        with self._errors(path):
            self._client.trim_rows(path, tablet_index, trimmed_row_count)

    # -- consumers --------------------------------------------------------------------------------

    def create_consumer(self, path: str, *, recursive: bool = False, ignore_existing: bool = False) -> None:
        self.create(TABLE, path, recursive=recursive, ignore_existing=ignore_existing, attributes={
            "dynamic": True, "schema": CONSUMER_SCHEMA, "treat_as_queue_consumer": True,
        })

    def register_queue_consumer(
        self, queue_path: str, consumer_path: str, *, vital: bool = False,
        partitions: Sequence[int] | None = None,
    ) -> None:
        with self._errors(f"{queue_path} <- {consumer_path}"):
            self._client.register_queue_consumer(
                queue_path, consumer_path, vital, partitions=None if partitions is None else list(partitions))

    def unregister_queue_consumer(self, queue_path: str, consumer_path: str) -> None:
        with self._errors(f"{queue_path} <- {consumer_path}"):
            self._client.unregister_queue_consumer(queue_path, consumer_path)

    def list_queue_consumer_registrations(
        self, queue_path: str | None = None, consumer_path: str | None = None,
    ) -> list[Registration]:
        with self._errors(queue_path or consumer_path or "registrations"):
            found = self._client.list_queue_consumer_registrations(
                queue_path=queue_path, consumer_path=consumer_path)
        return [registration(plain(r)) for r in found]

    def get_consumer_offsets(self, consumer_path: str, queue_path: str) -> dict[int, int]:
        query = (f"[partition_index], [offset] FROM [{consumer_path}]"
                 f" WHERE [queue_path] = {_quote(queue_path)}")
        with self._errors(consumer_path):
            rows = self._client.select_rows(query, **_WIRE)
        return {int(r["partition_index"]): int(r["offset"]) for r in rows}

    def pull_consumer(
        self, consumer_path: str, queue_path: str, offset: int | None, partition_index: int, *,
        max_row_count: int = 1000, max_data_weight: int = 16 * 1024 * 1024,
    ) -> pa.Table:
        schema = self.get_schema(queue_path)
        with self._errors(f"{queue_path} <- {consumer_path}, partition {partition_index}"):
            rows = list(self._client.pull_consumer(
                consumer_path, queue_path, offset, partition_index,
                max_row_count=max_row_count, max_data_weight=max_data_weight, **_WIRE))
        return from_yt_rows(schema, rows, service_columns=True)

    def advance_consumer(
        self, consumer_path: str, queue_path: str, partition_index: int, old_offset: int | None,
        new_offset: int,
    ) -> None:
        with self._errors(f"{consumer_path} for {queue_path}, partition {partition_index}"):
            self._client.advance_consumer(consumer_path, queue_path, partition_index, old_offset, new_offset,
                                          client_side=True)

    # -- sorted and static tables, documents --------------------------------------------------------

    def delete_rows(self, path: str, keys: Iterable[Mapping[str, Any]]) -> None:
        yt_keys = self._yt_keys(path, keys)
        with self._errors(path):
            self._client.delete_rows(path, yt_keys, **_WIRE)

    def _yt_keys(self, path: str, keys: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
        keys_only = key_schema(self.get_schema(path), path)
        return to_yt_rows(keys_only, to_arrow_table(keys_only, list(keys), path))

    def lookup_rows(self, path: str, keys: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
        return self._lookup(self._client, path, keys)

    def _lookup(self, client: Any, path: str, keys: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
        schema = self.get_schema(path)
        yt_keys = self._yt_keys(path, keys)
        with self._errors(path):
            rows = list(client.lookup_rows(path, yt_keys, **_WIRE))
        return from_yt_rows(schema, rows).to_pylist()

    def select_rows(self, path: str) -> list[dict[str, Any]]:
        schema = self.get_schema(path)
        with self._errors(path):
            rows = list(self._client.select_rows(f"* FROM [{path}]", **_WIRE))
        return sorted(from_yt_rows(schema, rows).to_pylist(), key=sort_key(schema.key_columns))

    def write_table(self, path: str, rows: ROWS, *, append: bool = False) -> None:
        """Write rows checked against the existing table's schema (create the table first)."""
        schema = self.get_schema(path)
        yt_rows = to_yt_rows(schema, to_arrow_table(schema, as_list_or_table(rows), path))
        with self._errors(path):
            self._client.write_table(yt.TablePath(path, append=append), yt_rows, **_WIRE)

    def read_table(self, path: str, *, max_rows: int = DEFAULT_CHUNK_ROWS) -> Iterator[pa.RecordBatch]:
        """Stream a static table with `read_table`; a sorted dynamic table with one `select_rows`."""
        info = require_kind(self, path, STATIC, SORTED)
        schema = TableSchema.from_yt(info.attributes["schema"])
        if info.kind == SORTED:
            yield from pa.Table.from_pylist(self.select_rows(path), schema=schema.arrow_schema()).to_batches(
                max_chunksize=max_rows)
            return
        chunk: list[dict[str, Any]] = []
        with self._errors(path):
            for row in self._client.read_table(path, **_WIRE):
                chunk.append(row)
                if len(chunk) == max_rows:
                    yield from from_yt_rows(schema, chunk).to_batches()
                    chunk = []
        if chunk:
            yield from from_yt_rows(schema, chunk).to_batches()

    # -- transactions -----------------------------------------------------------------------------

    def transaction(self) -> Transaction:
        """A tablet transaction on its own `YtClient`, so it never leaks into this object's calls."""
        client = self._new_client()
        with self._errors("tablet transaction"):
            return YtTransaction(self, client, client.Transaction(type="tablet"))


class YtTransaction(Transaction):
    """A `yt.wrapper` tablet transaction; each call attaches to it by id on the transaction's client.

    YTsaurus lookups inside a tablet transaction do not see its uncommitted writes, so the rows written
    and deleted here are kept per key and laid over lookup results.
    """

    def __init__(self, cluster: YtsaurusCluster, client: Any, tx: Any) -> None:
        self._cluster = cluster
        self._client = client
        self._tx = tx
        self._overlay: dict[str, dict[tuple[Any, ...], dict[str, Any] | None]] = {}

    @contextmanager
    def _attached(self, what: str) -> Iterator[None]:
        with self._cluster._errors(what), self._client.Transaction(transaction_id=self._tx.transaction_id):
            yield

    def insert_rows(self, path: str, rows: ROWS, *, tablet_index: int | None = None) -> None:
        prepared = self._cluster._prepare_insert(path, rows, tablet_index)
        with self._attached(path):
            self._client.insert_rows(path, prepared.yt_rows, **_WIRE)
        keys = prepared.schema.key_columns
        if keys:
            overlay = self._overlay.setdefault(path, {})
            for row in prepared.table.to_pylist():
                overlay[tuple(row[k] for k in keys)] = row

    def delete_rows(self, path: str, keys: Iterable[Mapping[str, Any]]) -> None:
        keys = list(keys)
        yt_keys = self._cluster._yt_keys(path, keys)
        with self._attached(path):
            self._client.delete_rows(path, yt_keys, **_WIRE)
        key_columns = self._cluster.get_schema(path).key_columns
        overlay = self._overlay.setdefault(path, {})
        for key in keys:
            overlay[tuple(key[k] for k in key_columns)] = None

    def lookup_rows(self, path: str, keys: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
        keys = list(keys)
        with self._attached(path):
            found = self._cluster._lookup(self._client, path, keys)
        key_columns = self._cluster.get_schema(path).key_columns
        merged = {tuple(r[k] for k in key_columns): r for r in found}
        merged.update(self._overlay.get(path, {}))
        wanted = (merged.get(tuple(key[k] for k in key_columns)) for key in keys)
        return [row for row in wanted if row is not None]

    def advance_consumer(
        self, consumer_path: str, queue_path: str, partition_index: int, old_offset: int | None,
        new_offset: int,
    ) -> None:
        with self._attached(f"{consumer_path} for {queue_path}, partition {partition_index}"):
            self._client.advance_consumer(consumer_path, queue_path, partition_index, old_offset, new_offset,
                                          client_side=True)

    def commit(self) -> None:
        with self._cluster._errors("tablet transaction commit"):
            self._tx.commit()

    def abort(self) -> None:
        with self._cluster._errors("tablet transaction abort"):
            self._tx.abort()


# -- errors ---------------------------------------------------------------------------------------


def translate_error(err: YtError, what: str, token: str | None) -> ClusterError:
    """Our error for a `yt.wrapper` error: the class by YT error code, the message naming `what`."""
    message = f"{what}: {_messages(err)}"
    if token:
        message = message.replace(token, "***")
    if err.is_resolve_error():
        return NoSuchPathError(message)
    if err.is_already_exists():
        return AlreadyExistsError(message)
    if err.contains_code(_CODE_CONSUMER_OFFSET_CONFLICT):
        return ConflictError(message)
    if err.find_matching_error(predicate=_is_not_registered):
        return NotRegisteredError(message)
    return ClusterError(message)


def _is_not_registered(err: YtError) -> bool:
    return int(err.code) == _CODE_AUTHORIZATION_ERROR and "not registered" in err.message


def _messages(err: YtError | Mapping[str, Any]) -> str:
    """The chain of error messages and codes, without the request details (headers, params)."""
    if isinstance(err, Mapping):
        err = YtError(message=err.get("message", ""), code=err.get("code", 1),
                      inner_errors=err.get("inner_errors"))
    own = "" if isinstance(err, yt.YtResponseError) else f"{err.message} (code {err.code})"
    inner = "; ".join(_messages(e) for e in err.inner_errors)
    return ": ".join(part for part in (own, inner) if part)


def _trimmed(path: str, tablet_index: int, lower: int, upper: int, trimmed: int) -> TrimmedRowsError:
    return TrimmedRowsError(f"{path}: partition {tablet_index}: rows [{lower}, {upper}) requested,"
                            f" rows below {trimmed} are trimmed")


def _quote(text: str) -> str:
    """A string literal of the YT query language."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'
