"""The queue producer commands of the stand-in: `create queue_producer` (through `create`), sessions and pushes.

As in YTsaurus, a push inside a tablet transaction answers at the call (its epoch and sequence numbers checked
against the committed session) and writes at commit, where the embedded cluster checks them again under its write
lock: a push whose session moved on meanwhile (a newer epoch) fails the commit, as a row-lock conflict would.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from streaming_core.cluster.base import MAX_ROWS_PER_TABLET_TRANSACTION
from streaming_core.cluster.producer_rows import sequence_numbers
from streaming_core.cluster.schema import SEQUENCE_NUMBER, TABLET_INDEX
from streaming_core.cluster.yson_values import plain

from ..errors import TOO_MANY_ROWS_IN_TRANSACTION, YtCodedError
from .common import Rows, input_table, transaction_id_of


class ProducerCommands:
    """Producer sessions: create, push, remove."""

    def create_queue_producer_session(self, p: Mapping[str, Any]) -> dict[str, Any]:
        session = self.cluster.create_queue_producer_session(
            str(p["producer_path"]), str(p["queue_path"]), str(p["session_id"]), plain(p.get("user_meta")))
        return {"epoch": session.epoch, "sequence_number": session.sequence_number, "user_meta": session.user_meta}

    def remove_queue_producer_session(self, p: Mapping[str, Any]) -> dict[str, Any]:
        """An empty map: the client parses this command's answer as a structured value (v4's empty output)."""
        self.cluster.remove_queue_producer_session(str(p["producer_path"]), str(p["queue_path"]),
                                                   str(p["session_id"]))
        return {}

    def push_queue_producer(self, p: Mapping[str, Any], rows: Rows | pa.Table) -> dict[str, Any]:
        producer, queue = str(p["producer_path"]), str(p["queue_path"])
        self._require_mounted(queue)
        initial = None if p.get("sequence_number") is None else int(p["sequence_number"])
        numbers = sequence_numbers(rows, initial, queue)
        table = input_table(self.cluster.get_schema(queue), _without_numbers(rows))
        _check_rows_per_tablet(queue, table)
        if initial is None and table.num_rows:
            table = table.append_column(SEQUENCE_NUMBER, pa.array(numbers, pa.int64()))
        args = (producer, queue, str(p["session_id"]), int(p["epoch"]), table)
        options = {"sequence_number": initial, "user_meta": plain(p.get("user_meta"))}
        if transaction_id_of(p) is None:
            with self.cluster.transaction() as tx:
                result = tx.push_queue_producer(*args, **options)
        else:
            trial = self.cluster.transaction()  # the answer at the call; the write at the transaction's commit
            try:
                result = trial.push_queue_producer(*args, **options)
            finally:
                trial.abort()
            self._tablet_write(p, lambda tx: tx.push_queue_producer(*args, **options))
        return {"last_sequence_number": result.last_sequence_number, "skipped_row_count": result.skipped_row_count}


def _check_rows_per_tablet(queue: str, table: pa.Table) -> None:
    """YTsaurus' limit on the rows one transaction writes to a tablet (1717 at commit,
    `yt/yt/ytlib/api/native/transaction.cpp`), checked per push here: a push is one transaction of its own or a part
    of the caller's (rows spread over the tablets without `$tablet_index` count against each tablet evenly)."""
    if TABLET_INDEX in table.column_names:
        counts = pc.value_counts(table.column(TABLET_INDEX)).to_pylist()
        most = max((c["counts"] for c in counts), default=0)
    else:
        most = table.num_rows
    if most > MAX_ROWS_PER_TABLET_TRANSACTION:
        raise YtCodedError(TOO_MANY_ROWS_IN_TRANSACTION, f"Transaction affects too many rows: {most} rows of a push "
                                                         f"to one tablet of {queue}, the limit is "
                                                         f"{MAX_ROWS_PER_TABLET_TRANSACTION}")


def _without_numbers(rows: Rows | pa.Table) -> Rows | pa.Table:
    if isinstance(rows, pa.Table):
        return rows.drop_columns([SEQUENCE_NUMBER]) if SEQUENCE_NUMBER in rows.column_names else rows
    return [{k: v for k, v in r.items() if k != SEQUENCE_NUMBER} for r in rows]
