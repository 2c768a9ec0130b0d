"""The embedded cluster (`local:///root`, the default backend): YTsaurus semantics on local disk.

`EmbeddedCluster` is composed of one mixin per role; the functions that plain calls and transactions
share take the connection to run on. Each SQL table has one owner module:
- `nodes`: YT path forms and node lookups; `tree`: the path tree, attributes, documents (`nodes`);
- `queues`: ordered tables, their tablets, appends, range reads, trimming (`tablets`, `chunks`);
- `consumers`: consumer tables, registrations, pull and advance (`registrations`);
- `producers`: producer tables, sessions and pushes (no SQL table of its own: sessions are sorted-table rows);
- `tables`: row calls on sorted tables, static tables (`static_chunks`);
- `sorted_store`: how sorted tables' rows are stored (`sorted_chunks`: runs of Arrow chunks), replaceable alone;
- `transactions`: tablet transactions;
- `sqlite_store`: the database itself (connections, write transactions, Arrow IPC blobs), and
  `arrow_chunks`: slicing and regrouping Arrow data into bounded chunks.
"""

from __future__ import annotations

import sqlite3

from ..base import Cluster, Transaction
from .consumers import ConsumerMixin
from .nodes import normalize_path
from .producers import ProducerMixin
from .queues import QueueMixin
from .sqlite_store import Store
from .tables import TableMixin
from .transactions import EmbeddedTransaction
from .tree import TreeMixin

__all__ = ["EmbeddedCluster", "EmbeddedTransaction", "normalize_path"]


class EmbeddedCluster(TreeMixin, QueueMixin, ConsumerMixin, ProducerMixin, TableMixin, Cluster):
    """YTsaurus semantics on one local SQLite database under `root`; see the package docstring.

    Notes
    -----
    Picklable as its root alone: each process (and thread) opens its own connections on first use.
    """

    name = "local"

    def __init__(self, root: str) -> None:
        self.root = root
        self.uri = "local://" + root
        self._store = Store(root)

    def __repr__(self) -> str:
        return f"EmbeddedCluster({self.root!r})"

    def __getstate__(self) -> dict[str, str]:
        return {"root": self.root}

    def __setstate__(self, state: dict[str, str]) -> None:
        self.__init__(state["root"])

    def close(self) -> None:
        self._store.close()

    @property
    def _conn(self) -> sqlite3.Connection:
        return self._store.connection()

    def transaction(self) -> Transaction:
        return EmbeddedTransaction(self)
