"""The commands the stand-in serves: each an HTTP API v4 descriptor and a handler over the embedded cluster.

A handler takes the request's parameters (parsed YSON) and rows (parsed in the request's `input_format`) and
returns the v4 result: a structured value (`{"value": ...}`, `{"transaction_id": ...}`, ...), rows to write in the
`output_format`, or bytes. Values cross in the wire representation `rows.WIRE_FORMAT` pins (see `rows.py`); the
stand-in refuses other format attributes instead of guessing.

Transactions follow YTsaurus: a tablet transaction's writes (`insert_rows`, `delete_rows`, `advance_consumer`) are
applied at commit, all or nothing, with YTsaurus' checks (compare-and-set at the call against the transaction's
snapshot, row lock conflicts and the per-tablet row limit at commit: see `transactions`); reads inside it see the last
committed state. A master transaction keeps its
`write_table` / `write_file` data until the outermost transaction commits (a nested one hands its writes to its
parent); Cypress calls inside it (create, remove, set) apply at once — a simplification no caller here relies on.
Its Cypress locks (`lock`: exclusive, shared, snapshot) conflict with a concurrent transaction's as YTsaurus' do (402,
see `locks`), and end with it; it expires `timeout` after its last ping, on the stand-in's clock. An object id path
(`#<id>`) names one node: a checkpoint file replaced by another node (a link) is gone for its old id.
Cypress file nodes (checkpoints that SPYT's file system writes) are files under the embedded cluster's root, as
the embedded cluster maps `yt:///` paths for Spark.

Dynamic tables are mounted from their creation; `unmount_table` / `mount_table` move a table's `@tablet_state`
asynchronously, as YTsaurus does (`tablets.TabletStates`: the state is the proxy's, kept while it runs). As in
YTsaurus, `reshard_table` needs the table unmounted, rows of an unmounted table are neither written nor read
(`TABLET_NOT_MOUNTED`), its tablet counters fail with a generic error, and a remount leaves mount caches stale for a
moment (`NO_SUCH_TABLET`).
"""

from __future__ import annotations

import contextvars
import hashlib
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import yt.yson as yson

from streaming_core.cluster.embedded import EmbeddedCluster

from ..acl import ROOT, SERVING_USER, Permissions
from ..queue_agent import QueueAgent
from ..registrations import REGISTRATION_DELAY_SECONDS, RegistrationCache, RegistrationCaches
from ..tablets import STATE_CHANGE_SECONDS, TabletStates
from .common import MAP_NODE_TYPE, Descriptor, PendingTransaction, Rowset, Tabular, check_format_attributes
from .consumers import ConsumerCommands
from .cypress import CypressCommands
from .producers import ProducerCommands
from .tables import TableCommands
from .transactions import TransactionCommands

__all__ = ["Commands", "Descriptor", "Rowset", "Tabular", "check_format_attributes"]

#: The address of the proxy serving the command under way (None: called directly, by no proxy).
SERVING_PROXY: contextvars.ContextVar[str | None] = contextvars.ContextVar("serving_proxy", default=None)


class Commands(CypressCommands, TableCommands, ConsumerCommands, ProducerCommands, TransactionCommands):
    """Every command of the stand-in, over one embedded cluster at `root`."""

    def __init__(self, root: str, cluster_name: str, *,
                 registration_delay_seconds: float = REGISTRATION_DELAY_SECONDS,
                 tablet_state_seconds: float = STATE_CHANGE_SECONDS,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.root = Path(root)
        self.cluster = EmbeddedCluster(root)
        self.cluster_name = cluster_name
        self.registration_caches = RegistrationCaches(
            lambda: [(r.queue_path, r.consumer_path) for r in self.cluster.list_queue_consumer_registrations()],
            delay_seconds=registration_delay_seconds, clock=clock)
        self.queue_agent = QueueAgent(self.cluster, cluster_name)
        self.permissions = Permissions(self.cluster)
        self._transactions: dict[str, PendingTransaction] = {}
        self._paths: dict[str, str] = {}
        #: Disk nodes' ids (checkpoint files): by path, the id and the object it was given to (device, inode, link).
        self._disk_ids: dict[str, tuple[str, tuple[int, int, bool]]] = {}
        self.tablet_states = TabletStates(tablet_state_seconds, clock=clock)
        self.clock = clock
        #: Called with each command's name and parameters after it was served: a test's hostile writer acting between
        #: two calls of a reader.
        self.after_call: list[Callable[[str, dict[str, Any]], None]] = []
        self._lock = threading.Lock()
        self._init_tablet_rules()
        self.handlers: dict[str, tuple[Descriptor, Callable[..., Any]]] = {}
        for descriptor, handler in self._table():
            self.handlers[descriptor.name] = (descriptor, handler)

    def call(self, name: str, params: dict[str, Any], *args: Any, proxy: str | None = None, user: str = ROOT) -> Any:
        """Run a command as the proxy at `proxy` serves it (its registration cache) for `user` (its permissions, see
        `acl`), with an object-id path (`#<id>`, as readers lock and read by id) resolved to its node."""
        path = params.get("path")
        if path is not None and str(path).startswith("#"):
            node_id, _, rest = str(path)[1:].partition("/")
            resolved = yson.to_yson_type(self.object_path(node_id) + ("/" + rest if rest else ""))
            resolved.attributes = dict(getattr(path, "attributes", {}) or {})
            params = {**params, "path": resolved}
        serving, serving_user = SERVING_PROXY.set(proxy), SERVING_USER.set(user)
        try:
            self.permissions.require_command(name, params)
            result = self.handlers[name][1](params, *args)
            for hook in self.after_call:
                hook(name, params)
            return result
        finally:
            SERVING_PROXY.reset(serving)
            SERVING_USER.reset(serving_user)

    @property
    def registration_cache(self) -> RegistrationCache:
        """The registration cache of the proxy serving the command under way."""
        return self.registration_caches.of(SERVING_PROXY.get())

    def node_id(self, path: str) -> str:
        """A node's stable id (`@id`), from its path."""
        digest = hashlib.sha1(path.encode()).hexdigest()
        node_id = f"{digest[:4]}-{digest[4:12]}-{0x3fe << 16 | MAP_NODE_TYPE:x}-{digest[12:20]}"
        self._paths[node_id] = path
        return node_id

    def descriptors(self) -> list[dict[str, Any]]:
        return [d.describe() for d, _ in self.handlers.values()]

    def _table(self) -> Iterator[tuple[Descriptor, Callable[..., Any]]]:
        structured = [
            ("get", False, self.get), ("list", False, self.list), ("exists", False, self.exists),
            ("create", True, self.create), ("remove", True, self.remove),
            ("move", True, self.move), ("lock", True, self.lock),
            ("mount_table", True, self.mount), ("unmount_table", True, self.unmount),
            ("reshard_table", True, self.reshard_table),
            ("get_tablet_infos", False, self.get_tablet_infos), ("trim_rows", True, self.trim_rows),
            ("start_transaction", True, self.start_transaction),
            ("commit_transaction", True, self.commit_transaction),
            ("abort_transaction", True, self.abort_transaction), ("ping_transaction", True, self.ping_transaction),
            ("register_queue_consumer", True, self.register), ("unregister_queue_consumer", True, self.unregister),
            ("list_queue_consumer_registrations", False, self.registrations),
            ("advance_consumer", True, self.advance_consumer), ("advance_queue_consumer", True, self.advance_consumer),
            ("create_queue_producer_session", True, self.create_queue_producer_session),
            ("remove_queue_producer_session", True, self.remove_queue_producer_session),
        ]
        for name, volatile, handler in structured:
            yield Descriptor(name, is_volatile=volatile), handler
        yield Descriptor("set", input_type="structured", is_volatile=True), self.set
        yield Descriptor("select_rows", output_type="tabular"), self.select_rows
        yield Descriptor("lookup_rows", input_type="tabular", output_type="tabular"), self.lookup_rows
        yield Descriptor("insert_rows", input_type="tabular", is_volatile=True), self.insert_rows
        yield Descriptor("delete_rows", input_type="tabular", is_volatile=True), self.delete_rows
        yield Descriptor("push_queue_producer", input_type="tabular", is_volatile=True), self.push_queue_producer
        for name in ("pull_consumer", "pull_queue_consumer"):
            yield Descriptor(name, output_type="tabular"), self.pull_consumer
        yield Descriptor("pull_queue", output_type="tabular"), self.pull_queue
        yield Descriptor("read_table", output_type="tabular", is_heavy=True), self.read_table
        yield Descriptor("write_table", input_type="tabular", is_volatile=True, is_heavy=True), self.write_table
        yield Descriptor("read_file", output_type="binary", is_heavy=True), self.read_file
        yield Descriptor("write_file", input_type="binary", is_volatile=True, is_heavy=True), self.write_file

