"""Cluster backends behind one interface; `connect(uri)` picks one.

URIs:
- `local:///abs/root` (or `local://` for the default root) -> `EmbeddedCluster` on local disk.
- `yt://proxy[:port]` -> `YtsaurusCluster` through `ytsaurus-client` over HTTPS: the token never crosses plain HTTP
  to another host unless the URI says so (`yt+http://proxy[:port]`); on a loopback proxy (`localhost`, `127.0.0.1`,
  `::1`) the scheme is the client's own configuration's (`YT_PREFER_HTTPS`, `YT_CONFIG_PATCHES`, `~/.yt/config`;
  plain HTTP by default). `yt+https://proxy[:port]` forces HTTPS. Credentials in a URI (`yt://user:pass@proxy`)
  are refused: the token comes from the client's sources. A query `?ca_bundle=/path.pem`
  names the CA bundle that verifies the proxy's certificate. The token comes as the client reads it: `YT_TOKEN`,
  `YT_TOKEN_PATH`, `~/.yt/token`.
- None -> `$OPSD_CLUSTER`, else `yt://$YT_PROXY` when `YT_PROXY` is set, else the embedded default.
"""

from __future__ import annotations

from pathlib import Path

from .base import Cluster, NodeInfo, Registration, TabletInfo, Transaction
from .errors import (
    AlreadyExistsError,
    AuthenticationError,
    BeyondQueueEndError,
    ClusterError,
    ConflictError,
    ExecutorTokenError,
    InvalidUriError,
    MissingTokenError,
    NoSuchPathError,
    NotRegisteredError,
    QueueReshardedError,
    RowError,
    SchemaError,
    TrimmedRowsError,
    UnreachableClusterError,
    UntrimmedTabletsError,
    VitalConsumerError,
    YsonBindingsError,
)
from .schema import Column, TableSchema
from .uris import default_uri, resolve_uri, yt_proxy, yt_uri

__all__ = [
    "AlreadyExistsError", "AuthenticationError", "BeyondQueueEndError", "Cluster", "ClusterError", "Column",
    "ConflictError", "ExecutorTokenError", "InvalidUriError", "MissingTokenError", "NoSuchPathError", "NodeInfo",
    "NotRegisteredError", "QueueReshardedError", "Registration", "RowError", "SchemaError", "TableSchema",
    "TabletInfo", "Transaction", "TrimmedRowsError", "UnreachableClusterError", "UntrimmedTabletsError",
    "VitalConsumerError", "YsonBindingsError", "connect", "default_uri", "resolve_uri", "yt_proxy", "yt_uri",
]

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

    proxy, config = yt_proxy(resolved)
    return YtsaurusCluster(proxy, token=token, config=config or None)
