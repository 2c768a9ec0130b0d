"""A claim held on YTsaurus for as long as a process lives: an exclusive Cypress lock of a master transaction that the
process keeps alive by pinging it, as YTsaurus users hold a node (`yt/yt/server/master/cypress_server/lock.h`,
`cypress_manager.cpp`; transactions: `yt/yt/server/lib/transaction_server/transaction_lease_tracker.cpp`).

`CypressClaim.take()` creates the claim node (a `map_node`, with its parents) if it is missing, starts a master
transaction titled with what the caller says of its owner, with a timeout (`ClaimTiming`), and takes an exclusive lock
on the node in it; `ytsaurus-client`'s pinger thread pings the transaction every `ping_period_seconds`. Another
process's claim on the node is YTsaurus' error 402, whose `winner_transaction` carries the holder's title:
`ClaimHeldError` hands that title on as the cluster gave it (untrusted text; the caller bounds and escapes it). Any
other failure (no write permission where the node goes, say) is the backend's `ClusterError`, naming the node.

A claim ends with `release()` (the transaction aborted: the lock is gone at once), or when its process ends however it
ends: the pings stop and YTsaurus aborts the transaction `timeout_seconds` later, so a crashed process's claim blocks
another for at most that long. A ping that fails for longer than its own timeout (the transaction expired or was
aborted by someone, the cluster out of reach) means the claim may be someone else's by now: `on_lost` is called once,
from the pinger thread, and the pinger stops.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import yt.wrapper as yt
from yt.common import YtError

from ...log import get_logger
from .client import client_token
from .errors import CONCURRENT_TRANSACTION_LOCK_CONFLICT, translate_error

log = get_logger(__name__)


@dataclass(frozen=True)
class ClaimTiming:
    """How long a claim outlives its last ping (`timeout_seconds`: the longest a crashed holder blocks another), and how
    often it is pinged (None: a third of the timeout, as `ytsaurus-client` pings by default)."""

    timeout_seconds: float = 30.0
    ping_period_seconds: float | None = None


class ClaimHeldError(Exception):
    """The claim node is locked by another transaction; `holder` is that transaction's title (None: it has none)."""

    def __init__(self, node: str, holder: str | None) -> None:
        super().__init__(f"{node}: claimed by another transaction")
        self.node, self.holder = node, holder


class CypressClaim:
    """An exclusive lock on the Cypress node `node`, held by a pinged master transaction titled `title`, through
    `client` (a client of its own: the claim sets its ping-failure handling). `on_lost()` is called once when a ping
    fails while the claim is held."""

    def __init__(self, client: Any, node: str, title: str, on_lost: Callable[[], None],
                 timing: ClaimTiming | None = None) -> None:
        self.client, self.node, self.title, self.timing = client, node, title, timing or ClaimTiming()
        self._on_lost = on_lost
        self._transaction: Any = None
        self._ended = threading.Event()

    @property
    def transaction_id(self) -> str | None:
        return None if self._transaction is None else str(self._transaction.transaction_id)

    def take(self) -> None:
        """Lock the node in a transaction of this claim; `ClaimHeldError` when another transaction holds it (then
        nothing is held)."""
        ended, on_lost = self._ended, self._on_lost

        def lost() -> None:  # a function, not a bound method: the pinger's client takes a deep copy of the config
            if not ended.is_set():
                ended.set()
                on_lost()

        self.client.config["ping_failed_mode"] = "call_function"
        self.client.config["ping_failed_function"] = lost
        try:
            self.client.create("map_node", self.node, recursive=True, ignore_existing=True)
        except YtError as err:
            raise translate_error(err, self.node, client_token(self.client)) from None
        timeout_ms = int(self.timing.timeout_seconds * 1000)
        period_ms = None if self.timing.ping_period_seconds is None else int(self.timing.ping_period_seconds * 1000)
        self._transaction = yt.Transaction(timeout=timeout_ms, attributes={"title": self.title}, ping=True,
                                           ping_period=period_ms, ping_timeout=period_ms, client=self.client)
        try:
            with self.client.Transaction(transaction_id=self._transaction.transaction_id):
                self.client.lock(f"{self.node}&", mode="exclusive")  # a link put there is locked, not followed
        except YtError as err:
            self.release()
            conflict = err.find_matching_error(code=CONCURRENT_TRANSACTION_LOCK_CONFLICT)
            if conflict is None:
                raise translate_error(err, self.node, client_token(self.client)) from None
            winner = conflict.attributes.get("winner_transaction")
            title = winner.get("title") if isinstance(winner, Mapping) else None
            raise ClaimHeldError(self.node, None if title is None else str(title)) from None

    def release(self) -> None:
        """End the claim: the transaction aborted, its lock gone (a transaction that is gone already is fine)."""
        self._ended.set()
        if self._transaction is None:
            return
        try:
            self._transaction.abort()
        except YtError as err:
            log.warning("claim_release_failed", node=self.node, transaction=self.transaction_id, error=err.message)
