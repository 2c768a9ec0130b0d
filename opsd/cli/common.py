"""What every `opsd` subcommand module shares: the input error type, how `--cluster` is opened and how a
`--schema` is read."""

from __future__ import annotations

import argparse
import json
from typing import Any

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


def parse_schema(text: str) -> list[dict[str, Any]]:
    """A YT schema from JSON (`[{"name": ..., "type": ...}]`) or the compact `name:type,name:type`."""
    if text.lstrip().startswith("["):
        try:
            columns = json.loads(text)
        except json.JSONDecodeError as e:
            raise CliError(f"--schema: invalid JSON: {e.msg} (column {e.colno})") from None
        bad = [i for i, c in enumerate(columns) if not (isinstance(c, dict) and isinstance(c.get("name"), str))]
        if bad or not columns:
            raise CliError(f"--schema: expected a non-empty JSON list of columns like "
                           f"[{{\"name\": \"data\", \"type\": \"string\"}}]; item(s) {bad} are not")
        return columns
    columns = []
    for item in text.split(","):
        name, sep, type_name = item.strip().partition(":")
        if not (sep and name and type_name):
            raise CliError(f"--schema: {item.strip()!r} is not name:type (e.g. data:string,n:int64)")
        columns.append({"name": name, "type": type_name})
    return columns
