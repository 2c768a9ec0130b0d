"""Cluster backends behind one interface; `connect(uri)` picks one.

URIs:
- `local:///abs/root` (or `local://` for the default root) -> `EmbeddedCluster` on local disk.
- `yt://proxy[:port]` -> `YtsaurusCluster` through `ytsaurus-client` (token from `YT_TOKEN`).
- None -> `$OPSD_CLUSTER`, else `yt://$YT_PROXY` when `YT_PROXY` is set, else the embedded default.
"""

from __future__ import annotations

import os
from pathlib import Path
from urllib.parse import urlparse

from .base import Cluster, NodeInfo, Registration, TabletInfo, Transaction
from .errors import (
    AlreadyExistsError,
    BeyondQueueEndError,
    ClusterError,
    ConflictError,
    InvalidUriError,
    NoSuchPathError,
    NotRegisteredError,
    SchemaError,
    TrimmedRowsError,
    UnreachableClusterError,
    VitalConsumerError,
)
from .schema import Column, TableSchema

__all__ = [
    "AlreadyExistsError", "BeyondQueueEndError", "Cluster", "ClusterError", "Column", "ConflictError",
    "InvalidUriError", "NoSuchPathError", "NodeInfo", "NotRegisteredError", "Registration", "SchemaError",
    "TableSchema", "TabletInfo", "Transaction", "TrimmedRowsError", "UnreachableClusterError", "VitalConsumerError",
    "connect", "default_uri", "resolve_uri",
]

#: Root of the embedded cluster when neither the URI nor `OPSD_CLUSTER_ROOT` names one.
DEFAULT_ROOT = ".opsd/cluster"


def default_uri() -> str:
    """The cluster URI used when none is given (see the module docstring)."""
    if os.environ.get("OPSD_CLUSTER"):
        return os.environ["OPSD_CLUSTER"]
    if os.environ.get("YT_PROXY"):
        return "yt://" + os.environ["YT_PROXY"]
    return "local://" + str(Path(os.environ.get("OPSD_CLUSTER_ROOT", DEFAULT_ROOT)).resolve())


def resolve_uri(uri: str | None) -> str:
    """A canonical URI: absolute roots for `local://`, the default for None or empty."""
    if not uri:
        return default_uri()
    parsed = urlparse(uri)
    if parsed.scheme == "local":
        if parsed.netloc:
            raise InvalidUriError(f"cluster URI {uri!r}: use local:///absolute/path (three slashes)")
        root = parsed.path or os.environ.get("OPSD_CLUSTER_ROOT", DEFAULT_ROOT)
        return "local://" + str(Path(root).resolve())
    if parsed.scheme == "yt":
        if not parsed.netloc:
            raise InvalidUriError(f"cluster URI {uri!r}: yt:// needs a proxy, e.g. yt://hahn or yt://host:80")
        return f"yt://{parsed.netloc}"
    raise InvalidUriError(f"cluster URI {uri!r}: expected local:///path or yt://proxy")


def connect(uri: str | None = None, *, token: str | None = None, must_exist: bool = False) -> Cluster:
    """Open the cluster named by `uri` (see the module docstring). Cheap: no I/O until first use.

    An embedded cluster comes into being at its first write; with `must_exist`, a root where nothing was ever
    created (a typo in a `local:///` URI, say) raises `NoSuchPathError` naming the root instead.
    """
    resolved = resolve_uri(uri)
    if resolved.startswith("local://"):
        from .embedded import EmbeddedCluster
        from .embedded.sqlite_store import DB_FILE

        root = resolved[len("local://"):]
        if must_exist and not (Path(root) / DB_FILE).exists():
            raise NoSuchPathError(f"no embedded cluster at {root}: nothing was ever created there (a typo in the "
                                  f"cluster URI? queues and consumers are created with `opsd queue create`, "
                                  f"`opsd consumer create`)")
        return EmbeddedCluster(root)
    from .ytsaurus import YtsaurusCluster

    return YtsaurusCluster(resolved[len("yt://"):], token=token)
