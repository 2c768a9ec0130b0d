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
A write outside a transaction is a transaction of its own, started and committed by the call. Reads inside a tablet
transaction (`lookup_rows`, `select_rows` naming its id) see its snapshot, the state at its start timestamp, as
YTsaurus reads them (`yt/yt/ytlib/api/native/transaction.cpp`: `LookupRows` and `SelectRows` delegated with
`options.Timestamp = GetReadTimestamp()`): neither rows committed by others since it started nor its own writes. The
stand-in keeps, for each commit made while an older transaction lives, what the rows it wrote held before it (sorted
tables' rows, consumer rows) and each appended tablet's row count before it (`snapshot_rows`,
`snapshot_row_count`).
"""


from __future__ import annotations

import datetime as dt
import threading
from collections import Counter
from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from streaming_core.cluster.base import MAX_ROWS_PER_TABLET_TRANSACTION, Cluster
from streaming_core.cluster.embedded import normalize_path
from streaming_core.cluster.errors import ConflictError
from streaming_core.cluster.schema import TABLET_INDEX
from streaming_core.cluster.yson_values import plain
from streaming_core.cluster.ytsaurus.errors import TRANSACTION_LOCK_CONFLICT

from ..acl import ROOT
from ..errors import TOO_MANY_ROWS_IN_TRANSACTION, YtCodedError
from ..locks import Locks
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
    #: Rows of sorted tables written (consumer rows included), by their key columns' values: what snapshots restore.
    rows: set[RowLock] = field(default_factory=set)

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
            written = {(path, tuple(r.values())) for r in rows.select(list(keys)).to_pylist()}
            self._writes.locks.update(written)
            self._writes.rows.update((normalize_path(path), key) for _, key in written)
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
        deleted = {(path, tuple(k[c] for c in columns)) for k in keys}
        self._writes.locks.update(deleted)
        self._writes.rows.update((normalize_path(path), key) for _, key in deleted)

    def advance_consumer(self, consumer: str, queue: str, partition: int, old_offset: int | None,
                         new_offset: int) -> None:
        if old_offset is not None:
            found = self._commands.snapshot_offset(self._writes.start, consumer, queue, partition)
            if found != old_offset:
                raise ConflictError(f"Offset conflict at partition {partition} of consumer {consumer}: expected "
                                    f"offset {old_offset}, found offset {found}")
        self._writes.locks.add((consumer, (queue, partition)))
        self._writes.consumer_rows.add((consumer, queue, partition))
        self._writes.rows.add((normalize_path(consumer),
                               (self._commands.cluster.name, normalize_path(queue), partition)))


class TransactionCommands:
    """Master and tablet transactions: writes buffered per transaction, applied at commit."""

    cluster: Any
    clock: Callable[[], float]
    _transactions: dict[str, PendingTransaction]
    _lock: threading.Lock

    def _init_tablet_rules(self) -> None:
        """The state YTsaurus' tablet rules need: commit versions, row locks, and what each commit overwrote while an
        older transaction lived (`_before`, keyed `("offset", consumer, queue, partition)`, `("row", path, key)`,
        `("tablet", path, tablet index)`)."""
        self._tablet_writes: dict[str, TabletWrites] = {}
        self._version = 0
        self._committed_at: dict[RowLock, int] = {}
        self._before: dict[Hashable, list[tuple[int, Any]]] = {}
        self._commit_lock = threading.RLock()
        self.locks = Locks(self._ancestors, self.describe_transaction)

    def _ancestors(self, tx_id: str) -> set[str]:
        with self._lock:
            return self._ancestry(tx_id)

    def start_transaction(self, p: Mapping[str, Any]) -> Any:
        kind = str(p.get("type") or "master")
        # The client names a master transaction's parent as the request's `transaction_id`.
        parent = transaction_id_of(p, "parent_id") or (None if kind == "tablet" else transaction_id_of(p))
        object_type = TABLET_TRANSACTION if kind == "tablet" else MASTER_TRANSACTION if parent is None else \
            NESTED_TRANSACTION
        # A master transaction lives `timeout` milliseconds past its last ping (the client always sends one); the
        # stand-in keeps tablet transactions until they end.
        timeout = None if kind == "tablet" or p.get("timeout") is None else int(p["timeout"]) / 1000
        tx = PendingTransaction(new_id(object_type), kind, parent, timeout=timeout,
                                attributes=plain(p.get("attributes") or {}))
        with self._commit_lock, self._lock:  # after any commit under way, and live before the next one
            self._expire_due()
            start = self._version
            if parent is not None and parent not in self._transactions:
                raise no_such_transaction(parent)
            tx.attributes["start_time"] = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
            self._ping(tx)
            self._transactions[tx.id] = tx
            if kind == "tablet":
                self._tablet_writes[tx.id] = TabletWrites(start)
        return {"transaction_id": tx.id}

    def ping_transaction(self, p: Mapping[str, Any]) -> None:
        """Prolong the transaction's life by its timeout (an expired one is gone: 11000, as for any other unknown
        id); `ping_ancestor_transactions` pings its ancestors too."""
        tx = self._pending(transaction_id_of(p))
        with self._lock:
            for tx_id in self._ancestry(tx.id) if p.get("ping_ancestor_transactions") else {tx.id}:
                self._ping(self._transactions[tx_id])

    def abort_transaction(self, p: Mapping[str, Any]) -> None:
        tx_id = transaction_id_of(p)
        with self._lock:
            self._expire_due()
            if tx_id not in self._transactions:
                raise no_such_transaction(tx_id)
            self._end(str(tx_id))

    def commit_transaction(self, p: Mapping[str, Any]) -> None:
        tx_id = transaction_id_of(p)
        with self._lock:
            self._expire_due()
            tx = self._transactions.pop(tx_id, None)
            if tx is None:
                raise no_such_transaction(tx_id)
            writes = self._tablet_writes.pop(tx.id, None)
            self.locks.release(tx.id, to=tx.parent)
            if tx.parent is not None:
                self._transactions[tx.parent].writes.extend(tx.writes)
                return
        if writes is not None:
            self._commit_tablet(tx.writes, writes)
        else:
            for write in tx.writes:
                write(self.cluster)

    def snapshot_offset(self, start: int, consumer: str, queue: str, partition: int) -> int:
        """The consumer's offset as of commit version `start`."""
        return self._as_of(start, ("offset", consumer, queue, partition),
                           lambda: self.cluster.get_consumer_offsets(consumer, queue).get(partition, 0))

    def snapshot_start(self, p: Mapping[str, Any]) -> int | None:
        """The commit version a read reads at: its tablet transaction's start, None outside one (the latest)."""
        tx_id = transaction_id_of(p)
        if tx_id is None:
            return None
        tx = self._pending(tx_id)
        with self._lock:
            writes = self._tablet_writes.get(tx.id)
        return None if writes is None else writes.start

    def snapshot_rows(self, start: int | None, path: str, key_columns: tuple[str, ...],
                      rows: list[dict[str, Any]]) -> dict[tuple[Any, ...], dict[str, Any]]:
        """A sorted table's `rows` read now, by key, as they stood at commit version `start` (None: as read): rows
        committed since then restored to what they held, new ones gone."""
        by_key = {tuple(r[c] for c in key_columns): r for r in rows}
        if start is None:
            return by_key
        path = normalize_path(path)
        with self._commit_lock:
            changed = [key for key in self._before if key[0] == "row" and key[1] == path]
            for key in changed:
                row = self._as_of(start, key, lambda k=key[2]: by_key.get(k))
                by_key[key[2]] = row
        return {key: row for key, row in by_key.items() if row is not None}

    def snapshot_row_count(self, start: int | None, path: str, tablet_index: int, now: int) -> int:
        """An ordered table's tablet's row count at commit version `start` (`now` read now; None: `now`)."""
        if start is None:
            return now
        return self._as_of(start, ("tablet", normalize_path(path), tablet_index), lambda: now)

    def _as_of(self, start: int, key: Hashable, current: Callable[[], Any]) -> Any:
        """What `key` held at commit version `start`: before the first commit after it, else `current()`."""
        with self._commit_lock:
            for version, before in self._before.get(key, []):
                if version > start:
                    return before
            return current()

    def _state_before(self, writes: TabletWrites) -> dict[Hashable, Any]:
        """What a commit is about to overwrite: the consumer offsets, sorted rows and tablet row counts it touches."""
        before: dict[Hashable, Any] = {
            ("offset", *row): self.cluster.get_consumer_offsets(row[0], row[1]).get(row[2], 0)
            for row in writes.consumer_rows}
        for path in {path for path, _ in writes.rows}:
            columns = self.cluster.get_schema(path).key_columns
            keys = [key for p, key in writes.rows if p == path]
            found = {tuple(r[c] for c in columns): r
                     for r in self.cluster.lookup_rows(path, [dict(zip(columns, key, strict=True)) for key in keys])}
            before.update({("row", path, key): found.get(key) for key in keys})
        for path in {path for path, _ in writes.appended}:
            before.update({("tablet", normalize_path(path), info.tablet_index): info.total_row_count
                           for info in self.cluster.get_tablet_infos(path)})
        return before

    def _pending(self, tx_id: str | None) -> PendingTransaction:
        with self._lock:
            self._expire_due()
            tx = self._transactions.get(tx_id or "")
        if tx is None:
            raise no_such_transaction(tx_id)
        return tx

    def _ping(self, tx: PendingTransaction) -> None:
        if tx.timeout is not None:
            tx.deadline = self.clock() + tx.timeout

    def _expire_due(self) -> None:
        """Abort every master transaction whose timeout passed since its last ping, as YTsaurus' transaction lease
        tracker does (`yt/yt/server/lib/transaction_server/transaction_lease_tracker.cpp`). Under `_lock`."""
        now = self.clock()
        for tx_id in [t.id for t in self._transactions.values() if t.deadline < now]:
            if tx_id in self._transactions:
                self._end(tx_id)

    def _end(self, tx_id: str) -> None:
        """Drop a transaction that aborts or expires, with its nested ones and every lock they hold. Under `_lock`."""
        for child in [t.id for t in self._transactions.values() if t.parent == tx_id]:
            self._end(child)
        self._transactions.pop(tx_id, None)
        self._tablet_writes.pop(tx_id, None)
        self.locks.release(tx_id)

    def _ancestry(self, tx_id: str) -> set[str]:
        """The transaction and its ancestors (those whose locks it never conflicts with). Under `_lock`."""
        found: set[str] = set()
        current: str | None = tx_id
        while current is not None and current not in found:
            found.add(current)
            parent = self._transactions.get(current)
            current = parent.parent if parent is not None else None
        return found

    def describe_transaction(self, tx_id: str) -> dict[str, Any]:
        """A transaction as a lock conflict names its winner (`TTransaction::GetErrorDescription`: id, start time,
        owner, timeout, title)."""
        with self._lock:
            tx = self._transactions.get(tx_id)
        if tx is None:
            return {"id": tx_id}
        described = {"id": tx.id, "start_time": tx.attributes.get("start_time"), "owner": ROOT}
        if tx.timeout is not None:
            described["timeout"] = int(tx.timeout * 1000)
        if "title" in tx.attributes:
            described["title"] = tx.attributes["title"]
        return described

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
            with self._lock:
                live = [w.start for w in self._tablet_writes.values()]
            before = self._state_before(writes) if live else {}
            with self.cluster.transaction() as atomic:
                for write in buffered:
                    write(atomic)
            self._version += 1
            if not live:  # no transaction's snapshot is older than this commit: nothing to remember
                self._committed_at.clear()
                self._before.clear()
                return
            for lock in writes.locks:
                self._committed_at[lock] = self._version
            for key, value in before.items():
                history = [e for e in self._before.get(key, []) if e[0] > min(live)]
                self._before[key] = [*history, (self._version, value)]

    def _master_write(self, p: Mapping[str, Any], write: Callable[[Cluster], None]) -> None:
        tx_id = transaction_id_of(p)
        if tx_id is not None:
            self._pending(tx_id).writes.append(write)
            return
        write(self.cluster)
