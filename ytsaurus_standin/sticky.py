"""A proxy's sticky transaction pool: the tablet transactions it started, which no other proxy knows.

As YTsaurus' HTTP proxy (`yt/yt/client/api/sticky_transaction_pool.cpp`, used by
`yt/yt/client/driver/command-inl.h` `AttachTransaction`): `start_transaction` with `sticky` registers the transaction
in the pool of the proxy that started it; any command that names a transaction that is not a master transaction
(`IsMasterTransactionId`) looks it up there, and a proxy that does not hold it answers 11000 (`NoSuchTransaction`),
"Sticky transaction ... is not found"; commit and abort take it out of the pool. Master transactions are not sticky:
every proxy attaches them by id.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

from .commands.common import MASTER_TRANSACTION, NESTED_TRANSACTION, transaction_id_of
from .errors import NO_SUCH_TRANSACTION, YtCodedError

#: The object types of master transactions (the low 16 bits of an id's third part).
_MASTER_TYPES = frozenset({MASTER_TRANSACTION, NESTED_TRANSACTION})
_FINISHING = frozenset({"commit_transaction", "abort_transaction"})


def is_master_transaction(tx_id: str) -> bool:
    """Whether `tx_id` names a master (Cypress) transaction, by the object type its id carries."""
    parts = tx_id.split("-")
    return len(parts) == 4 and int(parts[2], 16) & 0xFFFF in _MASTER_TYPES


def sticky_not_found(tx_id: str) -> YtCodedError:
    """YTsaurus' own error for a tablet transaction this proxy does not hold."""
    return YtCodedError(NO_SUCH_TRANSACTION, f"Sticky transaction {tx_id} is not found, this usually means that you "
                                             "use tablet transactions within HTTP API; consider using RPC API instead")


class StickyPool:
    """The tablet transactions one proxy (at `address`) holds."""

    def __init__(self, address: str) -> None:
        self.address = address
        self._held: set[str] = set()
        self._lock = threading.Lock()

    def require(self, params: Mapping[str, Any]) -> None:
        """Raise 11000 when the request names a tablet transaction this proxy does not hold."""
        tx_id = transaction_id_of(params)
        if tx_id is None or is_master_transaction(tx_id):
            return
        with self._lock:
            if tx_id not in self._held:
                raise sticky_not_found(tx_id)

    def follow(self, command: str, params: Mapping[str, Any], result: Any) -> None:
        """Keep what a served command changed: a sticky transaction started here, or one finished."""
        if command == "start_transaction" and params.get("sticky") and isinstance(result, Mapping):
            tx_id = str(result["transaction_id"])
            if not is_master_transaction(tx_id):
                with self._lock:
                    self._held.add(tx_id)
        elif command in _FINISHING:
            with self._lock:
                self._held.discard(transaction_id_of(params) or "")
