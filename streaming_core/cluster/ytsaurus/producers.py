"""Queue producers over YTsaurus: producer tables, sessions and pushes (`create_queue_producer_session`,
`push_queue_producer`, `remove_queue_producer_session`; server 24.1+).

A push sends the rows in `WIRE_FORMAT` with an explicit `$sequence_number` on every row (`ytsaurus-client` has no
parameter for YTsaurus' initial sequence number) and a `$tablet_index` on every row (placed as `insert_rows` places
them). Like `insert_rows`, `push_queue_producer` goes to a heavy proxy; inside a tablet transaction it is not retried
by the client (outside one its retries are safe: the server skips rows it has written).
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any

import pyarrow as pa
from yt.wrapper.http_helpers import get_http_api_commands

from ..base import ORDERED, QUEUE_PRODUCER, QUEUE_PRODUCERS_SINCE, ROWS, ProducerSession, PushResult, require_kind
from ..errors import ClusterError
from ..producer_rows import sequence_numbers
from ..schema import SEQUENCE_NUMBER
from ..yson_values import plain
from .client import WIRE_FORMAT
from .rows import as_list_or_table, prepare_insert
from .wire import encode_wire


class ProducerMixin:
    """The producer calls of `YtsaurusCluster`."""

    proxy: str
    _client: Any
    _errors: Callable[[str], AbstractContextManager[None]]

    def require_queue_producers(self) -> None:
        """From the commands the proxy lists (`/api/v4`): a proxy before YTsaurus 24.1 has no `push_queue_producer`."""
        with self._errors("the proxy's commands"):
            commands = get_http_api_commands(client=self._client)
        if "push_queue_producer" not in commands:
            raise ClusterError(f"{self.proxy}: queue producers need YTsaurus {QUEUE_PRODUCERS_SINCE} or newer; this "
                               f"cluster's proxies do not serve push_queue_producer (upgrade the cluster, or write "
                               f"without producer_path)")

    def create_queue_producer(self, path: str, *, recursive: bool = False, ignore_existing: bool = False) -> None:
        """YTsaurus' own `create queue_producer`: the schema and `treat_as_queue_producer` as the server sets them."""
        with self._errors(path):
            self._client.create(QUEUE_PRODUCER, path, recursive=recursive, ignore_existing=ignore_existing)

    def create_queue_producer_session(self, producer_path, queue_path, session_id, user_meta=None) -> ProducerSession:
        with self._errors(f"{producer_path} for {queue_path}, session {session_id}"):
            answer = plain(self._client.create_queue_producer_session(producer_path, queue_path, session_id,
                                                                      user_meta=user_meta))
        return ProducerSession(epoch=int(answer["epoch"]), sequence_number=int(answer["sequence_number"]),
                               user_meta=answer.get("user_meta"))

    def remove_queue_producer_session(self, producer_path, queue_path, session_id) -> None:
        with self._errors(f"{producer_path} for {queue_path}, session {session_id}"):
            self._client.remove_queue_producer_session(producer_path, queue_path, session_id)

    def push_queue_producer(self, producer_path, queue_path, session_id, epoch, rows, *, sequence_number=None,
                            user_meta=None) -> PushResult:
        return self._push(self._client, producer_path, queue_path, session_id, epoch, rows,
                          sequence_number=sequence_number, user_meta=user_meta)

    def _push(self, client: Any, producer_path: str, queue_path: str, session_id: str, epoch: int, rows: ROWS, *,
              sequence_number: int | None, user_meta: Any) -> PushResult:
        """`push_queue_producer` through `client`: this cluster's, or a transaction's."""
        wire = self._push_wire(queue_path, rows, sequence_number)
        with self._errors(f"{producer_path} -> {queue_path}, session {session_id}, epoch {epoch}"):
            answer = plain(client.push_queue_producer(producer_path, queue_path, session_id, epoch, wire,
                                                      user_meta=user_meta, input_format=WIRE_FORMAT, raw=True))
        return PushResult(last_sequence_number=int(answer["last_sequence_number"]),
                          skipped_row_count=int(answer["skipped_row_count"]))

    def _push_wire(self, queue_path: str, rows: ROWS, sequence_number: int | None) -> bytes:
        """The rows checked against the queue's schema and encoded, each with its `$tablet_index` and
        `$sequence_number`: bad rows raise here, before anything is sent."""
        rows = as_list_or_table(rows)
        numbers = sequence_numbers(rows, sequence_number, queue_path)
        if not isinstance(rows, pa.Table):
            rows = [{k: v for k, v in r.items() if k != SEQUENCE_NUMBER} for r in rows]
        prepared = prepare_insert(queue_path, require_kind(self, queue_path, ORDERED), rows, None)
        sent = prepared.sent.append_column(SEQUENCE_NUMBER, pa.array(numbers, pa.int64()))
        return encode_wire(prepared.schema, sent, path=queue_path)

