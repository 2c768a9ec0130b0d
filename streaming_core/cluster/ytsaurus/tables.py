"""Row calls over YTsaurus: `insert_rows` (queue append or sorted upsert), delete, lookup, select, and static
tables written and read whole; rows are checked against the schema before anything is sent."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import AbstractContextManager
from typing import Any

import pyarrow as pa
import yt.wrapper as yt
from yt.common import YtError

from ...log import get_logger
from ..base import ORDERED, READ_BATCH_ROWS, ROWS, SORTED, STATIC, require_kind
from ..schema import TableSchema, to_arrow_table
from . import query as query_names
from .client import ARROW_RAW, WIRE, WIRE_RAW
from .rows import PreparedRows, as_list_or_table, from_yt_rows, key_schema, prepare_insert, sort_key, to_yt_rows
from .wire import encode_wire

log = get_logger(__name__)


class TableMixin:
    """`insert_rows`, `delete_rows`, `lookup_rows`, `select_rows`, `write_table`, `read_table` of
    `YtsaurusCluster`, and the row preparation its transactions share."""

    _client: Any
    _errors: Callable[[str], AbstractContextManager[None]]

    #: Whether the proxy takes `arrow` input for `insert_rows`: None until an insert tried it.
    _arrow_inserts: bool | None = None

    def insert_rows(self, path: str, rows: ROWS, *, tablet_index: int | None = None) -> None:
        prepared = self._prepare_insert(path, rows, tablet_index)
        with self._errors(path):
            self._send_insert(self._client, path, prepared)

    def _send_insert(self, client: Any, path: str, prepared: PreparedRows) -> None:
        """`insert_rows` through `client` in the fastest format the proxy takes: `arrow` where the schema allows it
        and the proxy has not refused it, else binary YSON. A refused insert wrote nothing (an insert is atomic),
        so the first refusal of `arrow` is followed by the same rows in YSON, and YSON is used from then on."""
        if prepared.arrow_ok and self._arrow_inserts is not False:
            try:
                client.insert_rows(path, prepared.arrow(), **ARROW_RAW)
            except YtError as err:
                if self._arrow_inserts:
                    raise
                log.info("yt_arrow_input_refused", path=path, error=err.message, fallback="yson")
                self._arrow_inserts = False
            else:
                self._arrow_inserts = True
                return
        client.insert_rows(path, prepared.wire, **WIRE_RAW)

    def _prepare_insert(self, path: str, rows: ROWS, tablet_index: int | None) -> PreparedRows:
        """Validate and convert rows for `insert_rows`, before any write: bad rows raise here."""
        return prepare_insert(path, require_kind(self, path, ORDERED, SORTED), rows, tablet_index)

    def delete_rows(self, path: str, keys: Iterable[Mapping[str, Any]]) -> None:
        yt_keys = self._yt_keys(path, keys)
        with self._errors(path):
            self._client.delete_rows(path, yt_keys, **WIRE)

    def _yt_keys(self, path: str, keys: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
        keys_only = key_schema(self.get_schema(path), path)
        return to_yt_rows(keys_only, to_arrow_table(keys_only, list(keys), path))

    def lookup_rows(self, path: str, keys: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
        return self._lookup(self._client, path, keys)

    def _lookup(self, client: Any, path: str, keys: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
        """`lookup_rows` through `client`: this cluster's, or a transaction's."""
        schema = self.get_schema(path)
        yt_keys = self._yt_keys(path, keys)
        with self._errors(path):
            rows = list(client.lookup_rows(path, yt_keys, **WIRE))
        return from_yt_rows(schema, rows).to_pylist()

    def select_rows(self, path: str) -> list[dict[str, Any]]:
        schema = TableSchema.from_yt(require_kind(self, path, SORTED).attributes["schema"])
        with self._errors(path):
            rows = list(self._client.select_rows(f"* FROM {query_names.table(path)}", **WIRE))
        return sorted(from_yt_rows(schema, rows).to_pylist(), key=sort_key(schema.key_columns))

    def write_table(self, path: str, rows: ROWS, *, append: bool = False) -> None:
        """Write rows checked against the existing table's schema (create the table first)."""
        schema = TableSchema.from_yt(require_kind(self, path, STATIC).attributes["schema"])
        wire = encode_wire(schema, to_arrow_table(schema, as_list_or_table(rows), path), path=path)
        with self._errors(path):
            self._client.write_table(yt.TablePath(path, append=append), wire, **WIRE_RAW)

    def read_table(self, path: str, *, max_rows: int = READ_BATCH_ROWS) -> Iterator[pa.RecordBatch]:
        """Stream a static table with `read_table`; a sorted dynamic table with one `select_rows`."""
        info = require_kind(self, path, STATIC, SORTED)
        schema = TableSchema.from_yt(info.attributes["schema"])
        if info.kind == SORTED:
            yield from pa.Table.from_pylist(self.select_rows(path), schema=schema.arrow_schema()).to_batches(
                max_chunksize=max_rows)
            return
        chunk: list[dict[str, Any]] = []  # streamed: a static table may be larger than memory
        with self._errors(path):
            for row in self._client.read_table(path, **WIRE):
                chunk.append(row)
                if len(chunk) == max_rows:
                    yield from from_yt_rows(schema, chunk).to_batches()
                    chunk = []
        if chunk:
            yield from from_yt_rows(schema, chunk).to_batches()
