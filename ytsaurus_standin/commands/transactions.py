"""The transaction commands of the stand-in."""


from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from streaming_core.cluster.base import Cluster

from .common import (
    MASTER_TRANSACTION,
    NESTED_TRANSACTION,
    TABLET_TRANSACTION,
    PendingTransaction,
    new_id,
    no_such_transaction,
    transaction_id_of,
)


class TransactionCommands:
    """Master and tablet transactions: writes buffered per transaction, applied at commit."""

    def start_transaction(self, p: Mapping[str, Any]) -> Any:
        parent = transaction_id_of(p, "parent_id")
        kind = str(p.get("type") or "master")
        object_type = TABLET_TRANSACTION if kind == "tablet" else MASTER_TRANSACTION if parent is None else \
            NESTED_TRANSACTION
        tx = PendingTransaction(new_id(object_type), kind, parent)
        with self._lock:
            if parent is not None and parent not in self._transactions:
                raise no_such_transaction(parent)
            self._transactions[tx.id] = tx
        return {"transaction_id": tx.id}

    def ping_transaction(self, p: Mapping[str, Any]) -> None:
        self._pending(transaction_id_of(p))

    def abort_transaction(self, p: Mapping[str, Any]) -> None:
        tx_id = transaction_id_of(p)
        with self._lock:
            if self._transactions.pop(tx_id, None) is None:
                raise no_such_transaction(tx_id)
            for child in [t.id for t in self._transactions.values() if t.parent == tx_id]:
                self._transactions.pop(child, None)

    def commit_transaction(self, p: Mapping[str, Any]) -> None:
        tx_id = transaction_id_of(p)
        with self._lock:
            tx = self._transactions.pop(tx_id, None)
            if tx is None:
                raise no_such_transaction(tx_id)
            if tx.parent is not None:
                self._transactions[tx.parent].writes.extend(tx.writes)
                return
        if tx.kind == "tablet":
            with self.cluster.transaction() as atomic:
                for write in tx.writes:
                    write(atomic)
        else:
            for write in tx.writes:
                write(self.cluster)

    def _pending(self, tx_id: str | None) -> PendingTransaction:
        with self._lock:
            tx = self._transactions.get(tx_id or "")
        if tx is None:
            raise no_such_transaction(tx_id)
        return tx

    def _tablet_write(self, p: Mapping[str, Any], write: Callable[[Any], None]) -> None:
        """Buffer `write` in the request's tablet transaction, or apply it in a transaction of its own."""
        tx_id = transaction_id_of(p)
        if tx_id is not None:
            self._pending(tx_id).writes.append(write)
            return
        with self.cluster.transaction() as atomic:
            write(atomic)

    def _master_write(self, p: Mapping[str, Any], write: Callable[[Cluster], None]) -> None:
        tx_id = transaction_id_of(p)
        if tx_id is not None:
            self._pending(tx_id).writes.append(write)
            return
        write(self.cluster)
