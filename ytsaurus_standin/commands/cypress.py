"""The Cypress commands of the stand-in."""


from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pyarrow as pa

from streaming_core.cluster.base import FILE, LINK, MAP_NODE, QUEUE_PRODUCER, TABLE
from streaming_core.cluster.errors import AlreadyExistsError, NoSuchPathError
from streaming_core.cluster.schema import STAMPED_COLUMNS
from streaming_core.cluster.yson_values import plain

from ..errors import GENERIC, BadRequest, YtCodedError
from ..locks import EXCLUSIVE, MODES, Lock
from ..queue_agent import ATTRIBUTES as QUEUE_AGENT_ATTRIBUTES
from ..queue_agent import DYNAMIC_CONFIG_PATH
from ..tablets import UNMOUNTED
from .common import new_id, path_of, transaction_id_of, v4_value


class CypressCommands:
    """Cypress: nodes, attributes, files that back checkpoints, mounting and resharding."""

    def get(self, p: Mapping[str, Any]) -> Any:
        path = path_of(p)
        if path == "//sys/@cluster_name":
            return v4_value(p, self.cluster_name)
        if path == DYNAMIC_CONFIG_PATH:
            return v4_value(p, self.queue_agent.dynamic_config)
        disk = self._disk(path)
        if disk is not None and not self._in_tree(path):
            return v4_value(p, _filtered(self._disk_attrs(disk, path), p) if path.endswith("/@") else
                            self._disk_attrs(disk, path) if "/@" in path else None)
        node_path, _, attr = path.partition("/@")
        if attr in QUEUE_AGENT_ATTRIBUTES:
            return v4_value(p, self.queue_agent.attribute(node_path, attr))
        extra = self._computed_attrs(node_path) if "/@" in path else {}
        if attr in extra:
            return v4_value(p, extra[attr])
        value = self.cluster.get(path)
        if attr == "" and "/@" in path:
            value = _filtered({**value, **extra}, p)
        return v4_value(p, value)

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
        state = self.tablet_states.state(path)
        return {**sizes, "tablet_state": state, "tablet_count": count,
                "tablets": [{"index": i, "state": state} for i in range(count)]}

    def list(self, p: Mapping[str, Any]) -> Any:
        path = path_of(p)
        names = set(self.cluster.list(path)) if self._in_tree(path) else set()
        disk = self._disk(path)
        if disk is not None and disk.is_dir():
            names.update(child.name for child in disk.iterdir())
        elif not names and not self._in_tree(path):
            raise NoSuchPathError(f"{path}: no such node")
        return v4_value(p, sorted(names))

    def exists(self, p: Mapping[str, Any]) -> Any:
        path = path_of(p)
        return {"value": self.cluster.exists(path) or self._disk(path) is not None}

    def set(self, p: Mapping[str, Any], value: Any) -> None:
        if path_of(p) == DYNAMIC_CONFIG_PATH:
            self.queue_agent.dynamic_config = plain(value)
            return
        self.cluster.set(path_of(p), plain(value))

    def create(self, p: Mapping[str, Any]) -> Any:
        node_type, path = str(p["type"]), path_of(p)
        if node_type == FILE:
            target = self._disk_path(path)
            if target.exists() and not p.get("ignore_existing"):
                if p.get("force"):
                    target.unlink()
                else:
                    raise AlreadyExistsError(f"{path}: node already exists")
            target.parent.mkdir(parents=True, exist_ok=True)
            target.touch()
            return {"node_id": new_id()}
        if node_type == QUEUE_PRODUCER:
            self.cluster.create_queue_producer(path, recursive=bool(p.get("recursive")),
                                               ignore_existing=bool(p.get("ignore_existing")))
            return {"node_id": new_id()}
        attributes = plain(p.get("attributes") or {})
        if node_type == TABLE and "schema" not in attributes and self.cluster.exists(path):
            return {"node_id": new_id()}
        self.cluster.create(node_type, path, recursive=bool(p.get("recursive")),
                            ignore_existing=bool(p.get("ignore_existing")), attributes=attributes)
        return {"node_id": new_id()}

    def remove(self, p: Mapping[str, Any]) -> None:
        path = path_of(p)
        with self._lock:
            self._expire_due()
        disk = self._disk(path)
        if disk is not None and not self._in_tree(path):
            self.locks.check_write(_node_of(path), transaction_id_of(p))
            if disk.is_dir():
                for child in sorted(disk.rglob("*"), reverse=True):
                    child.rmdir() if child.is_dir() else child.unlink()
                disk.rmdir()
            else:
                disk.unlink()
            return
        self.locks.check_write(_node_of(path), transaction_id_of(p))
        self.cluster.remove(path, recursive=bool(p.get("recursive")), force=bool(p.get("force")))

    def move(self, p: Mapping[str, Any]) -> Any:
        self.cluster.move(str(p["source_path"]), str(p["destination_path"]), force=bool(p.get("force")))
        return {"node_id": new_id()}

    def lock(self, p: Mapping[str, Any]) -> Any:
        """A Cypress lock of the request's master transaction (`locks`): `mode` exclusive by default, shared with a
        `child_key` or `attribute_key`, or snapshot; a conflict with a concurrent transaction is 402."""
        path = _node_of(path_of(p))
        self._require_node(path)
        tx_id = transaction_id_of(p)
        mode = str(p.get("mode") or EXCLUSIVE)
        if tx_id is None:
            raise YtCodedError(GENERIC, f"Cannot take a lock for node {path} outside of a transaction")
        if mode not in MODES:
            raise BadRequest(f"lock mode {mode!r}: expected one of {', '.join(MODES)}")
        if p.get("waitable"):
            raise BadRequest("the stand-in takes no waitable locks")
        if self._pending(tx_id).kind == "tablet":
            raise YtCodedError(GENERIC, f"Cannot take a Cypress lock in tablet transaction {tx_id}")
        key = next(((kind, str(p[f"{kind}_key"])) for kind in ("child", "attribute") if p.get(f"{kind}_key")), None)
        lock_id = new_id()
        self.locks.take(path, Lock(lock_id, tx_id, mode, key))
        return {"lock_id": lock_id, "node_id": self.node_id(path), "revision": 1}

    def object_path(self, node_id: str) -> str:
        """The path of the object `#node_id` names: a resolve error when there is none, or when a disk node's id
        names an object no longer at its path (removed, or replaced by another node, a link say), as an object id
        in YTsaurus names that object and never another."""
        path = self._paths.get(node_id)
        if path is None:
            raise NoSuchPathError(f"#{node_id}: no such object")
        known = self._disk_ids.get(path)
        if known is not None and known[0] == node_id and _identity(self._disk_path(path), known[1][2]) != known[1]:
            raise NoSuchPathError(f"#{node_id}: no such object")
        return path

    def mount(self, p: Mapping[str, Any]) -> None:
        path = path_of(p)
        self._require_node(path)
        self.tablet_states.mount(path)

    def unmount(self, p: Mapping[str, Any]) -> None:
        path = path_of(p)
        self._require_node(path)
        self.tablet_states.unmount(path)

    def _require_mounted(self, path: str) -> None:
        self.tablet_states.require_rows(path)

    def reshard_table(self, p: Mapping[str, Any]) -> None:
        """`reshard_table` of a whole ordered table to `tablet_count` tablets, unmounted, as YTsaurus' master reshards
        it (`tablet_manager.cpp`, `ReshardTableImpl`): tablets below both counts keep their rows, added ones start
        empty, and the rows of removed ones are appended to the last tablet that stays; a removed tablet whose trimmed
        rows' chunks are still attached is refused (`TabletStates.trimmed_chunks_attached`)."""
        path = path_of(p)
        given = [name for name in ("pivot_keys", "first_tablet_index", "last_tablet_index", "uniform",
                                   "enable_slicing", "trimmed_row_counts") if p.get(name) is not None]
        if given or p.get("tablet_count") is None:
            raise BadRequest(f"{path}: the stand-in reshards a whole ordered table by tablet_count only"
                             + (f" (not {', '.join(given)})" if given else ""))
        self._require_node(path)
        if self.tablet_states.state(path) != UNMOUNTED:
            raise YtCodedError(GENERIC, "Cannot reshard table since not all of its tablets are in \"unmounted\" state")
        count = int(p["tablet_count"])
        removed = self.cluster.get_tablet_infos(path)[count:]
        for info in removed:
            if self.tablet_states.trimmed_chunks_attached(path, info.tablet_index, info.trimmed_row_count):
                raise YtCodedError(GENERIC, f"Some chunks of tablet {self.node_id(f'{path}/{info.tablet_index}')} "
                                            f"are not fully trimmed; such a tablet cannot participate in resharding")
        moved = [batch for info in removed for batch in self.cluster.read_tablet(
            path, info.tablet_index, info.trimmed_row_count, info.total_row_count)]
        for info in removed:
            self.cluster._trim_rows(path, info.tablet_index, info.total_row_count)
        self.cluster.reshard(path, count)
        if moved:
            rows = pa.Table.from_batches(moved)
            self.cluster.insert_rows(path, rows.drop_columns([c for c in STAMPED_COLUMNS if c in rows.column_names]),
                                     tablet_index=count - 1)

    def _require_node(self, path: str) -> None:
        if not self.cluster.exists(path) and self._disk(path) is None:
            raise NoSuchPathError(f"{path}: no such node")

    def _disk_attrs(self, disk: Path, path: str) -> Any:
        node_path, _, attr = path.partition("/@")
        size = disk.stat().st_size if disk.is_file() else 0
        # A symbolic link below the root is a Cypress link: `&` after its name reads the link itself.
        node_type = LINK if node_path.endswith("&") and disk.is_symlink() else MAP_NODE if disk.is_dir() else FILE
        attrs = {"type": node_type, "id": self._disk_object_id(node_path.removesuffix("&"), disk,
                                                               node_type == LINK),
                 "uncompressed_data_size": size, "compressed_data_size": size}
        if attr == "":
            return attrs
        if attr not in attrs:
            raise NoSuchPathError(f"{node_path}: no attribute {attr!r}")
        return attrs[attr]

    def _disk_object_id(self, path: str, disk: Path, link: bool) -> str:
        """The id of the disk node at `path`: the same while the same object is there (a link itself when `link`,
        else what the path leads to), a new one for another object."""
        identity = _identity(disk, link)
        known = self._disk_ids.get(path)
        if known is not None and known[1] == identity:
            return known[0]
        node_id = new_id()
        self._disk_ids[path] = (node_id, identity)
        self._paths[node_id] = path
        return node_id

    def _in_tree(self, path: str) -> bool:
        return self.cluster.exists(path.partition("/@")[0])

    def _disk_path(self, path: str) -> Path:
        """The disk path under the root of a Cypress path: confined to the root (no `///abs`, no `..`, no symlink
        that leads out of it), as Cypress has nothing outside its tree."""
        node_path = path.partition("/@")[0].rstrip("/").removesuffix("&")
        relative = node_path[2:]
        if not node_path.startswith("//") or relative.startswith("/") or "//" in relative:
            raise BadRequest(f"{path}: a Cypress path is //name/name... (no empty node name)")
        if ".." in Path(relative).parts:
            raise BadRequest(f"{path}: '..' is not a node name")
        target = self.root / relative
        if not target.resolve().is_relative_to(self.root.resolve()):
            raise BadRequest(f"{path}: leads out of the stand-in's root")
        return target

    def _disk(self, path: str) -> Path | None:
        """The file or directory backing a Cypress path outside the embedded tree (checkpoint files), or None."""
        if path in ("//", "") or path.startswith("//sys"):
            return None
        target = self._disk_path(path)
        return target if target.exists() and target.name != "" and target != self.root else None



def _identity(disk: Path, link: bool) -> tuple[int, int, bool] | None:
    """Which object is at `disk` (device, inode, whether a link is meant), None when nothing is."""
    try:
        found = disk.stat(follow_symlinks=not link)
    except OSError:
        return None
    return found.st_dev, found.st_ino, link


def _node_of(path: str) -> str:
    """The node a path names, as locks are kept: without a trailing `&` or `/`."""
    return path.partition("/@")[0].removesuffix("&").rstrip("/")


def _filtered(attributes: dict[str, Any], p: Mapping[str, Any]) -> dict[str, Any]:
    """The attributes a `get` of `.../@` asked for (its `attributes` filter, as `TSupportsAttributes::DoGetAttribute`
    writes only those), all of them without one."""
    wanted = p.get("attributes")
    return attributes if wanted is None else {k: v for k, v in attributes.items() if k in {str(a) for a in wanted}}
