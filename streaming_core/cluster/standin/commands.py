"""The commands the stand-in serves: each an HTTP API v4 descriptor and a handler over the embedded cluster.

A handler takes the request's parameters (parsed YSON) and rows (parsed in the request's `input_format`) and
returns the v4 result: a structured value (`{"value": ...}`, `{"transaction_id": ...}`, ...), rows to write in the
`output_format`, or bytes. Values cross in the wire representation `rows.WIRE_FORMAT` pins (see `rows.py`); the
stand-in refuses other format attributes instead of guessing.

Transactions follow YTsaurus: a tablet transaction's writes (`insert_rows`, `delete_rows`, `advance_consumer`) are
applied at commit, all or nothing; reads inside it see the last committed state. A master transaction keeps its
`write_table` / `write_file` data until the outermost transaction commits (a nested one hands its writes to its
parent); Cypress calls inside it (create, remove, set) apply at once — a simplification no caller here relies on.
Cypress file nodes (checkpoints that SPYT's file system writes) are files under the embedded cluster's root, as
the embedded cluster maps `yt:///` paths for Spark.

Dynamic tables are mounted from their creation; `unmount_table` / `mount_table` switch a table's `@tablet_state`
(the state is the proxy's, kept while it runs). As in YTsaurus, `reshard_table` needs the table unmounted, and rows
of an unmounted table are neither written nor read, nor are its tablet counters (`TABLET_NOT_MOUNTED`).
"""

from __future__ import annotations

import hashlib
import itertools
import threading
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import yt.yson as yson

from ..base import MAP_NODE, ORDERED, PULL_ROWS, READ_BATCH_BYTES, SORTED, TABLE, Cluster
from ..embedded import EmbeddedCluster, normalize_path
from ..errors import AlreadyExistsError, ClusterError, NoSuchPathError
from ..schema import ROW_INDEX, TABLET_INDEX, TableSchema, to_arrow_table
from ..yson_values import plain
from ..ytsaurus.rows import WIRE_FORMAT_ATTRIBUTES, from_yt_rows, to_yt_rows
from . import query as ql
from .errors import GENERIC, NO_SUCH_TRANSACTION, TABLET_NOT_MOUNTED, BadRequest, YtCodedError
from .queue_agent import ATTRIBUTES as QUEUE_AGENT_ATTRIBUTES
from .queue_agent import QueueAgent

FILE = "file"

Rows = list[dict[str, Any]]


@dataclass(frozen=True)
class Descriptor:
    """What `/api/v4` says of a command (`yt.wrapper.command.Command`)."""

    name: str
    input_type: str | None = None
    output_type: str = "structured"
    is_volatile: bool = False
    is_heavy: bool = False

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "input_type": self.input_type or "null", "output_type": self.output_type,
                "is_volatile": self.is_volatile, "is_heavy": self.is_heavy}


@dataclass(frozen=True)
class Rowset:
    """Rows as Arrow tables of `schema`'s columns (service columns such as `$row_index` first, where they come),
    written to the wire a column at a time (`encode_wire`)."""

    schema: TableSchema
    tables: Iterable[pa.Table]


@dataclass(frozen=True)
class Tabular:
    """Rows with the response parameters (`X-YT-Response-Parameters`) that go with them."""

    rows: Iterable[Any]
    parameters: dict[str, Any]


@dataclass
class PendingTransaction:
    """A transaction the proxy holds between calls: its kind, parent and the writes it applies at commit."""

    id: str
    kind: str
    parent: str | None
    writes: list[Callable[[Any], None]] = field(default_factory=list)


class Commands:
    """Every command of the stand-in, over one embedded cluster at `root`."""

    def __init__(self, root: str, cluster_name: str) -> None:
        self.root = Path(root)
        self.cluster = EmbeddedCluster(root)
        self.cluster_name = cluster_name
        self.queue_agent = QueueAgent(self.cluster, cluster_name)
        self._transactions: dict[str, PendingTransaction] = {}
        self._paths: dict[str, str] = {}
        self._unmounted: set[str] = set()
        self._lock = threading.Lock()
        self.handlers: dict[str, tuple[Descriptor, Callable[..., Any]]] = {}
        for descriptor, handler in self._table():
            self.handlers[descriptor.name] = (descriptor, handler)

    def call(self, name: str, params: dict[str, Any], *args: Any) -> Any:
        """Run a command, with an object-id path (`#<id>`, as readers lock and read by id) resolved to its node."""
        path = params.get("path")
        if path is not None and str(path).startswith("#"):
            node_id, _, rest = str(path)[1:].partition("/")
            if node_id not in self._paths:
                raise NoSuchPathError(f"{path}: no such object")
            resolved = yson.to_yson_type(self._paths[node_id] + ("/" + rest if rest else ""))
            resolved.attributes = dict(getattr(path, "attributes", {}) or {})
            params = {**params, "path": resolved}
        return self.handlers[name][1](params, *args)

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
        ]
        for name, volatile, handler in structured:
            yield Descriptor(name, is_volatile=volatile), handler
        yield Descriptor("set", input_type="structured", is_volatile=True), self.set
        yield Descriptor("select_rows", output_type="tabular"), self.select_rows
        yield Descriptor("lookup_rows", input_type="tabular", output_type="tabular"), self.lookup_rows
        yield Descriptor("insert_rows", input_type="tabular", is_volatile=True), self.insert_rows
        yield Descriptor("delete_rows", input_type="tabular", is_volatile=True), self.delete_rows
        for name in ("pull_consumer", "pull_queue_consumer"):
            yield Descriptor(name, output_type="tabular"), self.pull_consumer
        yield Descriptor("pull_queue", output_type="tabular"), self.pull_queue
        yield Descriptor("read_table", output_type="tabular", is_heavy=True), self.read_table
        yield Descriptor("write_table", input_type="tabular", is_volatile=True, is_heavy=True), self.write_table
        yield Descriptor("read_file", output_type="binary", is_heavy=True), self.read_file
        yield Descriptor("write_file", input_type="binary", is_volatile=True, is_heavy=True), self.write_file

    # -- Cypress ----------------------------------------------------------------------------------------------

    def get(self, p: Mapping[str, Any]) -> Any:
        path = _path(p)
        if path == "//sys/@cluster_name":
            return _value(p, self.cluster_name)
        disk = self._disk(path)
        if disk is not None and not self._in_tree(path):
            return _value(p, self._disk_attrs(disk, path) if "/@" in path else None)
        node_path, _, attr = path.partition("/@")
        if attr in QUEUE_AGENT_ATTRIBUTES:
            return _value(p, self.queue_agent.attribute(node_path, attr))
        extra = self._computed_attrs(node_path) if "/@" in path else {}
        if attr in extra:
            return _value(p, extra[attr])
        value = self.cluster.get(path)
        if attr == "" and "/@" in path:
            value = {**value, **extra}
        return _value(p, value)

    def _computed_attrs(self, path: str) -> dict[str, Any]:
        """Attributes the master computes that clients read: tablet states, and the sizes `read_table` plans by."""
        attrs = self.cluster.get(path + "/@")
        if attrs.get("type") != TABLE:
            return {}
        rows = int(attrs.get("row_count") or 0)
        sizes = {"id": self.node_id(path), "chunk_count": 1 if rows else 0, "compressed_data_size": 0,
                 "uncompressed_data_size": 0,
                 "data_weight": 0, "replication_factor": 3,
                 "sorted": any(c.get("sort_order") for c in attrs.get("schema") or [])}
        if not attrs.get("dynamic"):
            return sizes
        count = int(attrs.get("tablet_count") or 1)
        state = "unmounted" if normalize_path(path) in self._unmounted else "mounted"
        return {**sizes, "tablet_state": state, "tablet_count": count,
                "tablets": [{"index": i, "state": state} for i in range(count)]}

    def list(self, p: Mapping[str, Any]) -> Any:
        path = _path(p)
        names = set(self.cluster.list(path)) if self._in_tree(path) else set()
        disk = self._disk(path)
        if disk is not None and disk.is_dir():
            names.update(child.name for child in disk.iterdir())
        elif not names and not self._in_tree(path):
            raise NoSuchPathError(f"{path}: no such node")
        return _value(p, sorted(names))

    def exists(self, p: Mapping[str, Any]) -> Any:
        path = _path(p)
        return {"value": self.cluster.exists(path) or self._disk(path) is not None}

    def set(self, p: Mapping[str, Any], value: Any) -> None:
        self.cluster.set(_path(p), plain(value))

    def create(self, p: Mapping[str, Any]) -> Any:
        node_type, path = str(p["type"]), _path(p)
        if node_type == FILE:
            target = self._disk_path(path)
            if target.exists() and not p.get("ignore_existing"):
                if p.get("force"):
                    target.unlink()
                else:
                    raise AlreadyExistsError(f"{path}: node already exists")
            target.parent.mkdir(parents=True, exist_ok=True)
            target.touch()
            return {"node_id": _new_id()}
        attributes = plain(p.get("attributes") or {})
        if node_type == TABLE and "schema" not in attributes and self.cluster.exists(path):
            return {"node_id": _new_id()}
        self.cluster.create(node_type, path, recursive=bool(p.get("recursive")),
                            ignore_existing=bool(p.get("ignore_existing")), attributes=attributes)
        return {"node_id": _new_id()}

    def remove(self, p: Mapping[str, Any]) -> None:
        path = _path(p)
        disk = self._disk(path)
        if disk is not None and not self._in_tree(path):
            if disk.is_dir():
                for child in sorted(disk.rglob("*"), reverse=True):
                    child.rmdir() if child.is_dir() else child.unlink()
                disk.rmdir()
            else:
                disk.unlink()
            return
        self.cluster.remove(path, recursive=bool(p.get("recursive")), force=bool(p.get("force")))

    def move(self, p: Mapping[str, Any]) -> Any:
        self.cluster.move(str(p["source_path"]), str(p["destination_path"]), force=bool(p.get("force")))
        return {"node_id": _new_id()}

    def lock(self, p: Mapping[str, Any]) -> Any:
        path = _path(p)
        self._require_node(path)
        return {"lock_id": _new_id(), "node_id": self.node_id(path), "revision": 1}

    def mount(self, p: Mapping[str, Any]) -> None:
        path = _path(p)
        self._require_node(path)
        with self._lock:
            self._unmounted.discard(normalize_path(path))

    def unmount(self, p: Mapping[str, Any]) -> None:
        path = _path(p)
        self._require_node(path)
        with self._lock:
            self._unmounted.add(normalize_path(path))

    def _require_mounted(self, path: str) -> None:
        if normalize_path(path) in self._unmounted:
            raise YtCodedError(TABLET_NOT_MOUNTED, f"Table {path} is not mounted")

    def reshard_table(self, p: Mapping[str, Any]) -> None:
        """`reshard_table` of a whole ordered table to `tablet_count` tablets (`Cluster.reshard`), unmounted."""
        path = _path(p)
        given = [name for name in ("pivot_keys", "first_tablet_index", "last_tablet_index", "uniform",
                                   "enable_slicing", "trimmed_row_counts") if p.get(name) is not None]
        if given or p.get("tablet_count") is None:
            raise BadRequest(f"{path}: the stand-in reshards a whole ordered table by tablet_count only"
                             + (f" (not {', '.join(given)})" if given else ""))
        self._require_node(path)
        if normalize_path(path) not in self._unmounted:
            raise YtCodedError(GENERIC, "Cannot reshard table since not all of its tablets are in \"unmounted\" state")
        self.cluster.reshard(path, int(p["tablet_count"]))

    def _require_node(self, path: str) -> None:
        if not self.cluster.exists(path) and self._disk(path) is None:
            raise NoSuchPathError(f"{path}: no such node")

    def _disk_attrs(self, disk: Path, path: str) -> Any:
        node_path, _, attr = path.partition("/@")
        size = disk.stat().st_size if disk.is_file() else 0
        attrs = {"type": MAP_NODE if disk.is_dir() else FILE, "id": self.node_id(node_path),
                 "uncompressed_data_size": size, "compressed_data_size": size}
        if attr == "":
            return attrs
        if attr not in attrs:
            raise NoSuchPathError(f"{node_path}: no attribute {attr!r}")
        return attrs[attr]

    def _in_tree(self, path: str) -> bool:
        return self.cluster.exists(path.partition("/@")[0])

    def _disk_path(self, path: str) -> Path:
        node_path = path.partition("/@")[0].rstrip("/")
        relative = node_path[2:]
        if ".." in Path(relative).parts:
            raise BadRequest(f"{path}: '..' is not a node name")
        return self.root / relative

    def _disk(self, path: str) -> Path | None:
        """The file or directory backing a Cypress path outside the embedded tree (checkpoint files), or None."""
        if path in ("//", "") or path.startswith("//sys"):
            return None
        target = self._disk_path(path)
        return target if target.exists() and target.name != "" and target != self.root else None

    # -- queues and tables ------------------------------------------------------------------------------------

    def get_tablet_infos(self, p: Mapping[str, Any]) -> Any:
        self._require_mounted(_path(p))
        infos = self.cluster.get_tablet_infos(_path(p))
        wanted = [int(i) for i in p.get("tablet_indexes") or range(len(infos))]
        return {"tablets": [{"total_row_count": infos[i].total_row_count,
                             "trimmed_row_count": infos[i].trimmed_row_count,
                             "barrier_timestamp": 0, "last_write_timestamp": 0} for i in wanted]}

    def trim_rows(self, p: Mapping[str, Any]) -> None:
        self.cluster._trim_rows(_path(p), int(p["tablet_index"]), int(p["trimmed_row_count"]))

    def select_rows(self, p: Mapping[str, Any]) -> Rowset:
        try:
            q = ql.parse(str(p["query"]))
        except ql.QueryError as e:
            raise BadRequest(str(e)) from None
        info = self.cluster.node_info(q.path)
        self._require_mounted(q.path)
        schema = TableSchema.from_yt(info.attributes["schema"])
        if info.kind == ORDERED:
            tables: Iterable[pa.Table] = self._queue_rows(q)
        elif info.kind == SORTED:
            tables = [to_arrow_table(schema, self.cluster.select_rows(q.path), q.path)]
        else:
            raise BadRequest(f"{q.path}: select_rows reads dynamic tables; this one is static")
        return Rowset(schema, (_selected(t, q) for t in tables))

    def _queue_rows(self, q: ql.Query) -> Iterator[pa.Table]:
        infos = self.cluster.get_tablet_infos(q.path)
        tablet = q.equal(TABLET_INDEX)
        bounds = q.bounds(ROW_INDEX) or (0, float("inf"))
        picked = q.among(ROW_INDEX)
        for info in infos if tablet is None else infos[int(tablet):int(tablet) + 1]:
            if picked is not None:  # single rows (the source's byte cap probes them), not the range between
                rows = self.cluster.read_rows_at(q.path, info.tablet_index, [int(r) for r in picked])
                yield rows.add_column(0, TABLET_INDEX, pa.repeat(pa.scalar(info.tablet_index, pa.int64()),
                                                                 rows.num_rows))
                continue
            lower = max(info.trimmed_row_count, int(bounds[0]))
            upper = min(info.total_row_count, bounds[1] + 1)
            if lower < upper:
                for batch in self.cluster.read_tablet(q.path, info.tablet_index, lower, int(upper),
                                                      service_columns=True):
                    yield pa.Table.from_batches([batch])

    def lookup_rows(self, p: Mapping[str, Any], rows: Rows) -> Rowset:
        path = _path(p)
        schema = self.cluster.get_schema(path)
        keys = _input_table(_key_schema(schema), rows).to_pylist()
        return Rowset(schema, [to_arrow_table(schema, self.cluster.lookup_rows(path, keys), path)])

    def insert_rows(self, p: Mapping[str, Any], rows: Rows | pa.Table) -> None:
        path = _path(p)
        self._require_mounted(path)
        table = _input_table(self.cluster.get_schema(path), rows)
        if TABLET_INDEX in table.column_names:
            tablets = table.column(TABLET_INDEX)
            table = table.drop_columns([TABLET_INDEX])
            groups = [(int(t), table.filter(pc.equal(tablets, t))) for t in pc.unique(tablets).to_pylist()]
        else:
            groups = [(None, table)]

        def write(tx: Any) -> None:
            for tablet, group in groups:
                tx.insert_rows(path, group, tablet_index=tablet)

        self._tablet_write(p, write)

    def delete_rows(self, p: Mapping[str, Any], rows: Rows) -> None:
        path = _path(p)
        keys = _input_table(_key_schema(self.cluster.get_schema(path)), rows).to_pylist()
        self._tablet_write(p, lambda tx: tx.delete_rows(path, keys))

    def pull_consumer(self, p: Mapping[str, Any]) -> Rowset:
        queue = str(p["queue_path"])
        self._require_mounted(queue)
        offset = None if p.get("offset") is None else int(p["offset"])
        table = self.cluster.pull_consumer(
            str(p["consumer_path"]), queue, offset, int(p["partition_index"]),
            max_row_count=int(p.get("max_row_count") or PULL_ROWS),
            max_data_weight=int(p.get("max_data_weight") or READ_BATCH_BYTES))
        return Rowset(self.cluster.get_schema(queue), [table])

    def pull_queue(self, p: Mapping[str, Any]) -> Rowset:
        queue, tablet = str(p["queue_path"]), int(p["partition_index"])
        self._require_mounted(queue)
        info = self.cluster.get_tablet_infos(queue)[tablet]
        lower = max(int(p["offset"]), info.trimmed_row_count)
        upper = min(info.total_row_count, lower + int(p.get("max_row_count") or PULL_ROWS))
        batches = self.cluster.read_tablet(queue, tablet, lower, upper, service_columns=True) if lower < upper else []
        return Rowset(self.cluster.get_schema(queue), (pa.Table.from_batches([b]) for b in batches))

    def read_table(self, p: Mapping[str, Any]) -> Tabular:
        """Rows of the path's first row range (`<ranges=[{lower_limit={row_index=...}}]>`, as retries resume), with
        the response parameters the reader resumes by and, when asked, the row and range index control rows."""
        path = _path(p)
        schema = self.cluster.get_schema(path)
        ranges = plain(_attributes(p["path"]).get("ranges") or [{}])
        if len(ranges) != 1:
            raise BadRequest(f"{path}: the stand-in reads one row range at a time")
        total = int(self.cluster.get(path + "/@row_count"))
        lower = int(((ranges[0].get("lower_limit") or {}).get("row_index")) or 0)
        upper = min(total, int(((ranges[0].get("upper_limit") or {}).get("row_index")) or total))
        control = plain(p.get("control_attributes") or {})

        def rows() -> Iterator[Any]:
            if control.get("enable_range_index") or control.get("enable_row_index"):
                marker = yson.YsonEntity()
                marker.attributes = {**({"range_index": 0} if control.get("enable_range_index") else {}),
                                     **({"row_index": lower} if control.get("enable_row_index") else {})}
                yield marker
            done = 0
            for batch in self.cluster.read_table(path):
                start, stop = max(lower - done, 0), min(upper - done, batch.num_rows)
                if start < stop:
                    yield from _wire(schema, pa.Table.from_batches([batch.slice(start, stop - start)]))
                done += batch.num_rows

        return Tabular(rows(), {"start_row_index": lower, "approximate_row_count": max(upper - lower, 0)})

    def write_table(self, p: Mapping[str, Any], rows: Rows) -> None:
        path = _path(p)
        append = bool(_attributes(p["path"]).get("append", False))
        table = _input_table(self.cluster.get_schema(path), rows)
        self._master_write(p, lambda cluster: cluster.write_table(path, table, append=append))

    def read_file(self, p: Mapping[str, Any]) -> bytes:
        disk = self._disk(_path(p))
        if disk is None or not disk.is_file():
            raise NoSuchPathError(f"{_path(p)}: no such file")
        return disk.read_bytes()

    def write_file(self, p: Mapping[str, Any], data: bytes) -> None:
        target = self._disk_path(_path(p))
        append = bool(_attributes(p["path"]).get("append", False))

        def write(_: Cluster) -> None:
            target.parent.mkdir(parents=True, exist_ok=True)
            with target.open("ab" if append else "wb") as out:
                out.write(data)

        self._master_write(p, write)

    # -- consumers --------------------------------------------------------------------------------------------

    def register(self, p: Mapping[str, Any]) -> None:
        partitions = p.get("partitions")
        self.cluster.register_queue_consumer(
            str(p["queue_path"]), str(p["consumer_path"]), vital=bool(p.get("vital")),
            partitions=None if partitions is None else [int(x) for x in partitions])

    def unregister(self, p: Mapping[str, Any]) -> None:
        self.cluster.unregister_queue_consumer(str(p["queue_path"]), str(p["consumer_path"]))

    def registrations(self, p: Mapping[str, Any]) -> list[dict[str, Any]]:
        found = self.cluster.list_queue_consumer_registrations(
            queue_path=None if p.get("queue_path") is None else str(p["queue_path"]),
            consumer_path=None if p.get("consumer_path") is None else str(p["consumer_path"]))
        return [{"queue_path": r.queue_path, "consumer_path": r.consumer_path, "vital": r.vital,
                 "partitions": None if r.partitions is None else list(r.partitions)} for r in found]

    def advance_consumer(self, p: Mapping[str, Any]) -> None:
        args = (str(p["consumer_path"]), str(p["queue_path"]), int(p["partition_index"]),
                None if p.get("old_offset") is None else int(p["old_offset"]), int(p["new_offset"]))
        self._tablet_write(p, lambda tx: tx.advance_consumer(*args))

    # -- transactions -----------------------------------------------------------------------------------------

    def start_transaction(self, p: Mapping[str, Any]) -> Any:
        parent = _transaction_id(p, "parent_id")
        kind = str(p.get("type") or "master")
        object_type = TABLET_TRANSACTION if kind == "tablet" else MASTER_TRANSACTION if parent is None else \
            NESTED_TRANSACTION
        tx = PendingTransaction(_new_id(object_type), kind, parent)
        with self._lock:
            if parent is not None and parent not in self._transactions:
                raise _no_such_transaction(parent)
            self._transactions[tx.id] = tx
        return {"transaction_id": tx.id}

    def ping_transaction(self, p: Mapping[str, Any]) -> None:
        self._pending(_transaction_id(p))

    def abort_transaction(self, p: Mapping[str, Any]) -> None:
        tx_id = _transaction_id(p)
        with self._lock:
            if self._transactions.pop(tx_id, None) is None:
                raise _no_such_transaction(tx_id)
            for child in [t.id for t in self._transactions.values() if t.parent == tx_id]:
                self._transactions.pop(child, None)

    def commit_transaction(self, p: Mapping[str, Any]) -> None:
        tx_id = _transaction_id(p)
        with self._lock:
            tx = self._transactions.pop(tx_id, None)
            if tx is None:
                raise _no_such_transaction(tx_id)
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
            raise _no_such_transaction(tx_id)
        return tx

    def _tablet_write(self, p: Mapping[str, Any], write: Callable[[Any], None]) -> None:
        """Buffer `write` in the request's tablet transaction, or apply it in a transaction of its own."""
        tx_id = _transaction_id(p)
        if tx_id is not None:
            self._pending(tx_id).writes.append(write)
            return
        with self.cluster.transaction() as atomic:
            write(atomic)

    def _master_write(self, p: Mapping[str, Any], write: Callable[[Cluster], None]) -> None:
        tx_id = _transaction_id(p)
        if tx_id is not None:
            self._pending(tx_id).writes.append(write)
            return
        write(self.cluster)


_NULL_TRANSACTION = "0-0-0-0"
_ids = itertools.count(1)


#: YTsaurus object types that ids carry (the low 16 bits of their third part): clients branch on them.
MASTER_TRANSACTION, TABLET_TRANSACTION, NESTED_TRANSACTION, MAP_NODE_TYPE = 1, 2, 4, 303


def _new_id(object_type: int = MAP_NODE_TYPE) -> str:
    return f"{next(_ids):x}-{uuid.uuid4().hex[:8]}-{0x3fe << 16 | object_type:x}-{uuid.uuid4().hex[:8]}"


def _value(p: Mapping[str, Any], value: Any) -> Any:
    """A v4 result: the value itself when the caller asked `return_only_value`, else `{"value": ...}`."""
    return value if p.get("return_only_value") else {"value": value}


def _transaction_id(p: Mapping[str, Any], key: str = "transaction_id") -> str | None:
    value = p.get(key)
    return None if value is None or str(value) == _NULL_TRANSACTION else str(value)


def _no_such_transaction(tx_id: str | None) -> ClusterError:
    return YtCodedError(NO_SUCH_TRANSACTION, f"No such transaction {tx_id}")


def _path(p: Mapping[str, Any]) -> str:
    if "path" not in p:
        raise BadRequest("parameter 'path' is required")
    return str(p["path"])


def _attributes(value: Any) -> dict[str, Any]:
    return plain(getattr(value, "attributes", None) or {})


def _key_schema(schema: TableSchema) -> TableSchema:
    return TableSchema(tuple(c for c in schema.columns if c.sort_order))


def _wire(schema: TableSchema, table: pa.Table) -> Rows:
    return to_yt_rows(schema, table.select(schema.names))


def _input_table(schema: TableSchema, rows: Rows | pa.Table) -> pa.Table:
    """Rows a command took (parsed YSON rows, or an Arrow table the `arrow` input format gave) as Arrow."""
    if isinstance(rows, pa.Table):
        return rows
    service = [name for name in (TABLET_INDEX,) if rows and name in rows[0]]
    table = from_yt_rows(schema, rows)
    if service:
        table = table.add_column(0, TABLET_INDEX, pa.array([int(r[TABLET_INDEX]) for r in rows], pa.int64()))
    return table


def _selected(table: pa.Table, q: ql.Query) -> pa.Table:
    """The rows of `table` that meet the query's conditions, in its columns."""
    mask = None
    for condition in q.conditions:
        column = table.column(condition.column)
        holds = pc.and_(pc.greater_equal(column, condition.low), pc.less_equal(column, condition.high))
        if condition.among is not None:
            holds = pc.and_(holds, pc.is_in(column, value_set=pa.array(condition.among, column.type)))
        mask = holds if mask is None else pc.and_(mask, holds)
    if mask is not None:
        table = table.filter(mask)
    return table if q.columns is None else table.select(list(q.columns))


def check_format_attributes(attributes: Mapping[str, Any]) -> None:
    """Refuse a row format whose attributes would change the wire representation the stand-in speaks."""
    for key, value in attributes.items():
        if key in WIRE_FORMAT_ATTRIBUTES and str(value) != WIRE_FORMAT_ATTRIBUTES[key]:
            raise BadRequest(f"format attribute {key}={value}: the stand-in speaks "
                             f"{key}={WIRE_FORMAT_ATTRIBUTES[key]} only")
