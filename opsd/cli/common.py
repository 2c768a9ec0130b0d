"""What every `opsd` subcommand module shares: the input error type and how `--cluster` is opened."""

from __future__ import annotations

import argparse

from streaming_core.cluster import Cluster, NoSuchPathError, connect, default_uri

CLUSTER_HELP = "cluster URI: local:///path or yt://proxy (default: $OPSD_CLUSTER, yt://$YT_PROXY or .opsd/cluster)"


class CliError(Exception):
    """Bad input given to a command (a malformed schema, an invalid JSON line); the message names it."""


def open_cluster(args: argparse.Namespace, *, create: bool = False) -> Cluster:
    """The cluster named by `--cluster`, or the default one (see `streaming_core.cluster.default_uri`).

    Only commands that `create` may bring an embedded cluster into being; the others refuse a root where
    nothing exists, naming the path they looked for and the root they searched.
    """
    try:
        return connect(args.cluster or default_uri(), must_exist=not create)
    except NoSuchPathError as e:
        wanted = getattr(args, "path", None) or getattr(args, "queue", None)
        raise NoSuchPathError(f"{wanted}: {e}" if wanted else str(e)) from None
