"""Cypress locks as YTsaurus' master takes them (`yt/yt/server/master/cypress_server/cypress_manager.cpp`, `CheckLock`;
modes in `yt/yt/server/master/cypress_server/lock.h`).

A lock belongs to a master transaction and lives until that transaction commits (a nested transaction's locks pass
to its parent), aborts or expires. Modes: `snapshot` conflicts with nothing; `exclusive` with every other lock but a
snapshot; `shared` with an exclusive one, and, when it names a `child_key` or an `attribute_key`, with a shared lock
of the same key. A lock held by the requesting transaction or one of its ancestors never conflicts ("concurrent"
means neither); a conflict is error 402, "Cannot take "exclusive" lock for node //x since "exclusive" lock is taken by
concurrent transaction ...", with the winner's description (`id`, `title`, ...) in `winner_transaction`. The
stand-in takes no waitable (pending) locks and keeps locks by path (a node moved away keeps none).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from streaming_core.cluster.ytsaurus.errors import CONCURRENT_TRANSACTION_LOCK_CONFLICT

from .errors import YtCodedError

EXCLUSIVE, SHARED, SNAPSHOT = "exclusive", "shared", "snapshot"
MODES = (EXCLUSIVE, SHARED, SNAPSHOT)


@dataclass(frozen=True)
class Lock:
    """One lock: its id, its transaction, its mode and the key of a shared lock (`("child", name)`, or None)."""

    id: str
    transaction: str
    mode: str
    key: tuple[str, str] | None = None


class Locks:
    """The locks of every node, by path. `ancestors(tx)` gives a transaction's id and its ancestors' ids;
    `describe(tx)` the description a conflict names the winner by."""

    def __init__(self, ancestors: Callable[[str], set[str]], describe: Callable[[str], Mapping[str, Any]]) -> None:
        self._ancestors = ancestors
        self._describe = describe
        self._by_path: dict[str, list[Lock]] = {}
        self._guard = threading.Lock()

    def take(self, path: str, lock: Lock) -> None:
        """Take `lock` on the node at `path`, or raise 402 naming the lock of a concurrent transaction in its way."""
        mine = self._ancestors(lock.transaction)
        with self._guard:
            held = self._by_path.setdefault(path, [])
            blocking = next((other for other in held if lock.mode != SNAPSHOT and other.transaction not in mine
                             and _conflict(lock, other)), None)
            if blocking is None:
                held.append(lock)
        if blocking is not None:
            raise self._conflict_error(path, lock, blocking)

    def check_write(self, path: str, transaction: str | None) -> None:
        """A write that needs the node exclusively (removing it) outside `transaction`'s locks: 402 when a concurrent
        transaction holds a lock on it or below it, as the implicit exclusive lock of the write would conflict."""
        mine = self._ancestors(transaction) if transaction else set()
        below = path.rstrip("/") + "/"
        with self._guard:
            blocking = next(((locked, other) for locked, held in self._by_path.items()
                             if locked == path or locked.startswith(below)
                             for other in held if other.transaction not in mine and other.mode != SNAPSHOT), None)
        if blocking is not None:
            raise self._conflict_error(blocking[0], Lock("", transaction or "", EXCLUSIVE), blocking[1])

    def release(self, transaction: str, to: str | None = None) -> None:
        """Release `transaction`'s locks (its end), or hand them to its parent `to` (a nested transaction's commit)."""
        with self._guard:
            for path, held in list(self._by_path.items()):
                kept = [lk for lk in held if lk.transaction != transaction]
                if to is not None:
                    kept += [Lock(lk.id, to, lk.mode, lk.key) for lk in held if lk.transaction == transaction]
                if kept:
                    self._by_path[path] = kept
                else:
                    del self._by_path[path]

    def of(self, path: str) -> list[Lock]:
        with self._guard:
            return list(self._by_path.get(path, []))

    def _conflict_error(self, path: str, wanted: Lock, other: Lock) -> YtCodedError:
        winner = dict(self._describe(other.transaction))
        if wanted.key is not None and other.key == wanted.key:
            message = (f"Cannot take lock for {wanted.key[0]} {wanted.key[1]!r} of node {path} since this "
                       f"{wanted.key[0]} is locked by concurrent transaction {other.transaction}")
        else:
            message = (f'Cannot take "{wanted.mode}" lock for node {path} since "{other.mode}" lock is taken by '
                       f"concurrent transaction {other.transaction}")
        return YtCodedError(CONCURRENT_TRANSACTION_LOCK_CONFLICT, message, winner_transaction=winner)


def _conflict(wanted: Lock, other: Lock) -> bool:
    """Whether `wanted` conflicts with `other`, a lock of a concurrent transaction (`CheckLock`)."""
    if other.mode == SNAPSHOT:
        return False
    if EXCLUSIVE in (wanted.mode, other.mode):
        return True
    return wanted.key is not None and wanted.key == other.key
