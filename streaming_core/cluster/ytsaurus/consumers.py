"""Queue consumers over YTsaurus: consumer tables, registrations, offsets, pull and advance.

A YTsaurus proxy answers `pull_consumer` and `list_queue_consumer_registrations` from a registration cache it
refreshes every 10 s (`yt/yt/ytlib/queue_client/config.cpp`, `cache_refresh_period`), each proxy its own: a pull
soon after `register_queue_consumer` may be refused as "not registered" (901). A pull so refused is tried again,
with a log line that says why, for `REGISTRATION_VISIBLE_WITHIN_SECONDS`; only then is it `NotRegisteredError`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from typing import Any, TypeVar

import pyarrow as pa
from yt.common import YtError

from ...log import get_logger
from ..base import (
    ORDERED,
    PULL_ROWS,
    READ_BATCH_BYTES,
    SORTED,
    TABLE,
    Registration,
    require_kind,
    wait_for_registration,
)
from ..errors import SchemaError
from ..schema import CONSUMER_SCHEMA
from ..yson_values import plain
from . import query as query_names
from .client import WIRE, WIRE_RAW
from .errors import not_registered
from .rows import registration
from .wire import decode_wire

#: YTsaurus' registration cache refresh period (10 s) and a margin: how long a fresh registration may stay unseen.
REGISTRATION_VISIBLE_WITHIN_SECONDS = 12.0
T = TypeVar("T")
log = get_logger(__name__)


class ConsumerMixin:
    """The consumer calls of `YtsaurusCluster`."""

    _client: Any
    _errors: Callable[[str], AbstractContextManager[None]]
    registration_visible_within_seconds = REGISTRATION_VISIBLE_WITHIN_SECONDS

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
            raw = self._while_registration_is_fresh(queue_path, consumer_path, lambda: self._client.pull_consumer(
                consumer_path, queue_path, offset, partition_index,
                max_row_count=max_row_count, max_data_weight=max_data_weight, **WIRE_RAW).read())
        return decode_wire(schema, raw, service_columns=True)

    def _while_registration_is_fresh(self, queue_path: str, consumer_path: str, call: Callable[[], T]) -> T:
        """`call()`, tried again while the proxy answers "not registered", for at most
        `registration_visible_within_seconds` (a registration the proxy's cache does not see yet); the YTsaurus
        error of the last try, or of any other failure, is raised as it came."""
        results: list[T] = []
        refusals: list[YtError] = []

        def attempt() -> bool:
            try:
                results.append(call())
            except YtError as err:
                if not not_registered(err):
                    raise
                refusals.append(err)
                return False
            return True

        if wait_for_registration(attempt, self.registration_visible_within_seconds, lambda: log.info(
                "yt_registration_not_visible_yet", queue=queue_path, consumer=consumer_path,
                waiting_seconds=self.registration_visible_within_seconds,
                reason="YTsaurus proxies refresh their registration cache every 10 s")):
            return results[-1]
        raise refusals[-1]

    def advance_consumer(
        self, consumer_path: str, queue_path: str, partition_index: int, old_offset: int | None,
        new_offset: int,
    ) -> None:
        with self._errors(f"{consumer_path} for {queue_path}, partition {partition_index}"):
            self._client.advance_consumer(consumer_path, queue_path, partition_index, old_offset, new_offset,
                                          client_side=True)


