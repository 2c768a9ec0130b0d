"""The queue producer commands of the stand-in: `create queue_producer` (through `create`), sessions and pushes.

As in YTsaurus, a push inside a tablet transaction answers at the call (its epoch and sequence numbers checked
against the committed session) and writes at commit, with the tablet rules of every write (`transactions`): it locks
its session's row (1700 when another push of that session committed first) and counts its rows per tablet (1717 past
100,000); the embedded cluster checks epoch and numbers again under its write lock.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pyarrow as pa

from streaming_core.cluster.producer_rows import sequence_numbers
from streaming_core.cluster.schema import SEQUENCE_NUMBER
from streaming_core.cluster.yson_values import plain

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
        if initial is None and table.num_rows:
            table = table.append_column(SEQUENCE_NUMBER, pa.array(numbers, pa.int64()))
        args = (producer, queue, str(p["session_id"]), int(p["epoch"]), table)
        options = {"sequence_number": initial, "user_meta": plain(p.get("user_meta"))}
        results = []

        def write(tx: Any) -> None:  # the ledger's push records locks and rows; the commit's returns the result
            result = tx.push_queue_producer(*args, **options)
            if result is not None:
                results.append(result)

        if transaction_id_of(p) is not None:
            trial = self.cluster.transaction()  # the answer at the call; the write at the transaction's commit
            try:
                write(trial)
            finally:
                trial.abort()
        self._tablet_write(p, write)
        result = results[0]
        return {"last_sequence_number": result.last_sequence_number, "skipped_row_count": result.skipped_row_count}


def _without_numbers(rows: Rows | pa.Table) -> Rows | pa.Table:
    if isinstance(rows, pa.Table):
        return rows.drop_columns([SEQUENCE_NUMBER]) if SEQUENCE_NUMBER in rows.column_names else rows
    return [{k: v for k, v in r.items() if k != SEQUENCE_NUMBER} for r in rows]
