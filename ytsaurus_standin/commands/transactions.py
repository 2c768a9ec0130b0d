"""The transaction commands of the stand-in, with YTsaurus' tablet transaction rules.

A tablet transaction's writes (`insert_rows`, `delete_rows`, `advance_consumer`) are buffered and applied at commit,
all or nothing; each call is also checked at once against a `TabletWrites` ledger of the transaction:
- `advance_consumer` with an `old_offset` compares it at the call with the offset the transaction's snapshot (its
  start) holds: 3100 at the call otherwise (`yt/yt/client/queue_client/consumer_client.cpp`, "Offset conflict at
  partition ... expected offset ..., found offset ...");
- the rows of sorted tables it writes (consumer rows included) are locked: a transaction that commits after another
  transaction committed one of them since its start gets 1700 at commit, "Row lock conflict due to concurrent write"
  (the tablet node's `TransactionLockConflict`);
- at most `MAX_ROWS_PER_TABLET_TRANSACTION` rows per tablet (a sorted table's rows merged by key first; a sorted
  table is one tablet here): 1717 "Transaction affects too many rows" at commit (`yt/yt/ytlib/api/native/
  transaction.cpp`, `TTabletCommitSession`).
A write outside a transaction is a transaction of its own, started and committed by the call. Reads (`lookup_rows`,
`select_rows`) see the last committed state, not the transaction's snapshot (see `docs/ytsaurus.md`).
"""


from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from streaming_core.cluster.base import MAX_ROWS_PER_TABLET_TRANSACTION, Cluster
from streaming_core.cluster.errors import ConflictError
from streaming_core.cluster.schema import TABLET_INDEX
from streaming_core.cluster.ytsaurus.errors import TRANSACTION_LOCK_CONFLICT

from ..errors import TOO_MANY_ROWS_IN_TRANSACTION, YtCodedError
from .common import (
    MASTER_TRANSACTION,
    NESTED_TRANSACTION,
    TABLET_TRANSACTION,
    PendingTransaction,
    new_id,
    no_such_transaction,
    transaction_id_of,
)

#: A locked row: the sorted table's path and the row's key (a consumer row's: queue path and partition).
RowLock = tuple[str, tuple[Any, ...]]


@dataclass
class TabletWrites:
    """What one tablet transaction has written so far, as the commit will check it."""

    #: The commit version whose state the transaction's snapshot reads.
    start: int
    locks: set[RowLock] = field(default_factory=set)
    #: Rows per (ordered table, tablet index).
    appended: Counter[tuple[str, int | None]] = field(default_factory=Counter)
    #: Consumer rows written: `(consumer, queue, partition)`.
    consumer_rows: set[tuple[str, str, int]] = field(default_factory=set)

    def rows_per_tablet(self) -> Counter[tuple[str, int | None]]:
        """Rows per tablet: appends as counted, a sorted table's distinct keys (one tablet each)."""
        rows = Counter(self.appended)
        rows.update((path, 0) for path, _ in self.locks)
        return rows


class _Ledger:
    """The ledger side of a buffered write: records what the write would do (the call's checks), writing nothing."""

    def __init__(self, commands: TransactionCommands, writes: TabletWrites) -> None:
        self._commands = commands
        self._writes = writes

    def insert_rows(self, path: str, rows: pa.Table, *, tablet_index: int | None = None) -> None:
        keys = self._commands.cluster.get_schema(path).key_columns
        if keys:
            self._writes.locks.update((path, tuple(r.values())) for r in rows.select(list(keys)).to_pylist())
        else:
            self._writes.appended[(path, tablet_index)] += rows.num_rows

    def push_queue_producer(self, producer: str, queue: str, session_id: str, epoch: int, rows: pa.Table,
                            **_: Any) -> None:
        """A push locks its session's row and appends its rows to their tablets (`$tablet_index`, else spread)."""
        self._writes.locks.add((producer, (queue, session_id)))
        if TABLET_INDEX in rows.column_names:
            self._writes.appended.update({(queue, int(t)): n for t, n in
                                          Counter(rows.column(TABLET_INDEX).to_pylist()).items()})
        else:
            self._writes.appended[(queue, None)] += rows.num_rows

    def delete_rows(self, path: str, keys: list[dict[str, Any]]) -> None:
        columns = self._commands.cluster.get_schema(path).key_columns
        self._writes.locks.update((path, tuple(k[c] for c in columns)) for k in keys)

    def advance_consumer(self, consumer: str, queue: str, partition: int, old_offset: int | None,
                         new_offset: int) -> None:
        if old_offset is not None:
            found = self._commands.snapshot_offset(self._writes.start, consumer, queue, partition)
            if found != old_offset:
                raise ConflictError(f"Offset conflict at partition {partition} of consumer {consumer}: expected "
                                    f"offset {old_offset}, found offset {found}")
        self._writes.locks.add((consumer, (queue, partition)))
        self._writes.consumer_rows.add((consumer, queue, partition))


class TransactionCommands:
    """Master and tablet transactions: writes buffered per transaction, applied at commit."""

    cluster: Any
    _transactions: dict[str, PendingTransaction]
    _lock: threading.Lock

    def _init_tablet_rules(self) -> None:
        """The state YTsaurus' tablet rules need: commit versions, row locks, consumer offsets before each commit."""
        self._tablet_writes: dict[str, TabletWrites] = {}
        self._version = 0
        self._committed_at: dict[RowLock, int] = {}
        self._offsets_before: dict[tuple[str, str, int], list[tuple[int, int]]] = {}
        self._commit_lock = threading.RLock()

    def start_transaction(self, p: Mapping[str, Any]) -> Any:
        parent = transaction_id_of(p, "parent_id")
        kind = str(p.get("type") or "master")
        object_type = TABLET_TRANSACTION if kind == "tablet" else MASTER_TRANSACTION if parent is None else \
            NESTED_TRANSACTION
        tx = PendingTransaction(new_id(object_type), kind, parent)
        with self._commit_lock:
            start = self._version  # after any commit under way
        with self._lock:
            if parent is not None and parent not in self._transactions:
                raise no_such_transaction(parent)
            self._transactions[tx.id] = tx
            if kind == "tablet":
                self._tablet_writes[tx.id] = TabletWrites(start)
        return {"transaction_id": tx.id}

    def ping_transaction(self, p: Mapping[str, Any]) -> None:
        self._pending(transaction_id_of(p))

    def abort_transaction(self, p: Mapping[str, Any]) -> None:
        tx_id = transaction_id_of(p)
        with self._lock:
            if self._transactions.pop(tx_id, None) is None:
                raise no_such_transaction(tx_id)
            self._tablet_writes.pop(tx_id or "", None)
            for child in [t.id for t in self._transactions.values() if t.parent == tx_id]:
                self._transactions.pop(child, None)

    def commit_transaction(self, p: Mapping[str, Any]) -> None:
        tx_id = transaction_id_of(p)
        with self._lock:
            tx = self._transactions.pop(tx_id, None)
            if tx is None:
                raise no_such_transaction(tx_id)
            writes = self._tablet_writes.pop(tx.id, None)
            if tx.parent is not None:
                self._transactions[tx.parent].writes.extend(tx.writes)
                return
        if writes is not None:
            self._commit_tablet(tx.writes, writes)
        else:
            for write in tx.writes:
                write(self.cluster)

    def snapshot_offset(self, start: int, consumer: str, queue: str, partition: int) -> int:
        """The consumer's offset as of commit version `start`: before the first commit after it, else the current."""
        with self._commit_lock:
            for version, before in self._offsets_before.get((consumer, queue, partition), []):
                if version > start:
                    return before
            return self.cluster.get_consumer_offsets(consumer, queue).get(partition, 0)

    def _pending(self, tx_id: str | None) -> PendingTransaction:
        with self._lock:
            tx = self._transactions.get(tx_id or "")
        if tx is None:
            raise no_such_transaction(tx_id)
        return tx

    def _tablet_write(self, p: Mapping[str, Any], write: Callable[[Any], None]) -> None:
        """Check `write` against the request's tablet transaction and buffer it there, or commit it as a transaction
        of its own."""
        tx_id = transaction_id_of(p)
        if tx_id is None:
            writes = TabletWrites(self._version)
            write(_Ledger(self, writes))
            self._commit_tablet([write], writes)
            return
        tx = self._pending(tx_id)
        writes = self._tablet_writes.get(tx.id)
        if writes is not None:
            write(_Ledger(self, writes))
        tx.writes.append(write)

    def _commit_tablet(self, buffered: list[Callable[[Any], None]], writes: TabletWrites) -> None:
        """Apply a tablet transaction's writes at once, unless a row it locked was committed since it started (1700)
        or a tablet would take too many rows (1717)."""
        with self._commit_lock:
            for lock in sorted(writes.locks, key=repr):
                if self._committed_at.get(lock, -1) > writes.start:
                    raise YtCodedError(TRANSACTION_LOCK_CONFLICT, f"Row lock conflict due to concurrent write "
                                                                  f"(table {lock[0]}, key {list(lock[1])})")
            for (path, tablet), rows in sorted(writes.rows_per_tablet().items(), key=repr):
                if rows > MAX_ROWS_PER_TABLET_TRANSACTION:
                    raise YtCodedError(TOO_MANY_ROWS_IN_TRANSACTION, f"Transaction affects too many rows (table "
                                                                     f"{path}, tablet {tablet}: {rows} rows, limit "
                                                                     f"{MAX_ROWS_PER_TABLET_TRANSACTION})")
            before = {row: self.cluster.get_consumer_offsets(row[0], row[1]).get(row[2], 0)
                      for row in writes.consumer_rows}
            with self.cluster.transaction() as atomic:
                for write in buffered:
                    write(atomic)
            self._version += 1
            with self._lock:
                live = [w.start for w in self._tablet_writes.values()]
            if not live:  # no transaction's snapshot is older than this commit: nothing to remember
                self._committed_at.clear()
                self._offsets_before.clear()
                return
            for lock in writes.locks:
                self._committed_at[lock] = self._version
            for row, offset in before.items():
                history = [e for e in self._offsets_before.get(row, []) if e[0] > min(live)]
                self._offsets_before[row] = [*history, (self._version, offset)]

    def _master_write(self, p: Mapping[str, Any], write: Callable[[Cluster], None]) -> None:
        tx_id = transaction_id_of(p)
        if tx_id is not None:
            self._pending(tx_id).writes.append(write)
            return
        write(self.cluster)
