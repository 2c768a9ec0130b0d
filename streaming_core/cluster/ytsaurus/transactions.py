"""Tablet transactions over YTsaurus: a `yt.wrapper` tablet transaction whose lookups see its own writes."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager
from typing import Any, Protocol

import pyarrow as pa

from ..base import ROWS, PushResult, Transaction
from ..schema import TableSchema
from .client import WIRE
from .rows import PreparedRows


class TransactionHost(Protocol):
    """What a tablet transaction asks of the `YtsaurusCluster` that started it (the cluster's module imports this
    one): its error translation, the row preparation and calls it shares with the cluster's own writes and reads, and
    its schemas and static reads."""

    def _errors(self, what: str) -> AbstractContextManager[None]: ...

    def _prepare_insert(self, path: str, rows: ROWS, tablet_index: int | None) -> PreparedRows: ...

    def _send_insert(self, client: Any, path: str, prepared: PreparedRows) -> None: ...

    def _yt_keys(self, path: str, keys: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]: ...

    def _lookup(self, client: Any, path: str, keys: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]: ...

    def _push(self, client: Any, producer_path: str, queue_path: str, session_id: str, epoch: int, rows: ROWS, *,
              sequence_number: int | None, user_meta: Any) -> PushResult: ...

    def get_schema(self, path: str) -> TableSchema: ...

    def read_table(self, path: str) -> Iterator[pa.RecordBatch]: ...


class YtTransaction(Transaction):
    """A `yt.wrapper` tablet transaction; each call attaches to it by id on the transaction's client.

    YTsaurus lookups inside a tablet transaction do not see its uncommitted writes, so the rows written
    and deleted here are kept per key and laid over lookup results.
    """

    def __init__(self, cluster: TransactionHost, client: Any, tx: Any) -> None:
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
            self._cluster._send_insert(self._client, path, prepared)
        keys = prepared.schema.key_columns
        if keys:
            overlay = self._overlay.setdefault(path, {})
            for row in prepared.table.to_pylist():
                overlay[tuple(row[k] for k in keys)] = row

    def delete_rows(self, path: str, keys: Iterable[Mapping[str, Any]]) -> None:
        keys = list(keys)
        yt_keys = self._cluster._yt_keys(path, keys)
        with self._attached(path):
            self._client.delete_rows(path, yt_keys, **WIRE)
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

    def push_queue_producer(self, producer_path, queue_path, session_id, epoch, rows, *, sequence_number=None,
                            user_meta=None) -> PushResult:
        with self._attached(queue_path):
            return self._cluster._push(self._client, producer_path, queue_path, session_id, epoch, rows,
                                       sequence_number=sequence_number, user_meta=user_meta)

    def publish_table(self, source: str, path: str) -> int:
        """Copies: a tablet transaction covers dynamic tables' rows only, so the static rows are read and
        inserted (in reads of at most `READ_BATCH_ROWS`, below a tablet transaction's row limit)."""
        rows = 0
        for batch in self._cluster.read_table(source):
            self.insert_rows(path, batch)
            rows += batch.num_rows
        return rows

    def commit(self) -> None:
        with self._cluster._errors("tablet transaction commit"):
            self._tx.commit()

    def abort(self) -> None:
        with self._cluster._errors("tablet transaction abort"):
            self._tx.abort()
