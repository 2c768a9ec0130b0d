"""Queue consumers over YTsaurus: consumer tables, registrations, offsets, pull and advance."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from typing import Any

import pyarrow as pa

from ..base import ORDERED, PULL_ROWS, READ_BATCH_BYTES, SORTED, TABLE, Registration, require_kind
from ..errors import SchemaError
from ..schema import CONSUMER_SCHEMA
from ..yson_values import plain
from . import query as query_names
from .client import WIRE, WIRE_RAW
from .rows import registration
from .wire import decode_wire


class ConsumerMixin:
    """The consumer calls of `YtsaurusCluster`."""

    _client: Any
    _errors: Callable[[str], AbstractContextManager[None]]

    def create_consumer(self, path: str, *, recursive: bool = False, ignore_existing: bool = False) -> None:
        self.create(TABLE, path, recursive=recursive, ignore_existing=ignore_existing, attributes={
            "dynamic": True, "schema": CONSUMER_SCHEMA, "treat_as_queue_consumer": True,
        })

    def register_queue_consumer(
        self, queue_path: str, consumer_path: str, *, vital: bool = False,
        partitions: Sequence[int] | None = None,
    ) -> None:
        """Register, after checking the two tables' kinds here (YTsaurus' own refusal has no code of its own)."""
        require_kind(self, queue_path, ORDERED)
        if not require_kind(self, consumer_path, SORTED).attributes.get("treat_as_queue_consumer"):
            raise SchemaError(f"{consumer_path}: not a consumer (a sorted table without treat_as_queue_consumer)")
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
        query = (f"[partition_index], [offset] FROM {query_names.table(consumer_path)}"
                 f" WHERE [queue_cluster] = {query_names.string(self.name)}"
                 f" AND [queue_path] = {query_names.string(queue_path)}")
        with self._errors(consumer_path):
            rows = self._client.select_rows(query, **WIRE)
        return {int(r["partition_index"]): int(r["offset"]) for r in rows}

    def pull_consumer(
        self, consumer_path: str, queue_path: str, offset: int | None, partition_index: int, *,
        max_row_count: int = PULL_ROWS, max_data_weight: int = READ_BATCH_BYTES,
    ) -> pa.Table:
        schema = self.get_schema(queue_path)
        with self._errors(f"{queue_path} <- {consumer_path}, partition {partition_index}"):
            raw = self._client.pull_consumer(
                consumer_path, queue_path, offset, partition_index,
                max_row_count=max_row_count, max_data_weight=max_data_weight, **WIRE_RAW).read()
        return decode_wire(schema, raw, service_columns=True)

    def advance_consumer(
        self, consumer_path: str, queue_path: str, partition_index: int, old_offset: int | None,
        new_offset: int,
    ) -> None:
        with self._errors(f"{consumer_path} for {queue_path}, partition {partition_index}"):
            self._client.advance_consumer(consumer_path, queue_path, partition_index, old_offset, new_offset,
                                          client_side=True)


