"""What every `opsd` subcommand module shares: the parser and help style, the input error type, how `--cluster`
is opened (and named in errors), how a query's checkpoint is named (`QUERY --config FILE` or `--checkpoint`), how a
`--schema` is read, and the daemon's default address."""

from __future__ import annotations

import argparse
import json
import os
from typing import Any

from opsd.collect.positions import QueryTarget, targets_for
from opsd.config.load import ConfigError, load_config
from opsd.config.models import HttpSettings
from streaming_core.cluster import Cluster, NoSuchPathError, connect, resolve_uri

#: A running daemon's address when a command names none: `http.host` and `http.port` as a config defaults them.
DEFAULT_URL = "http://{host}:{port}".format(**HttpSettings().model_dump())
CLUSTER_HELP = "cluster URI: local:///path or yt://proxy (default: $OPSD_CLUSTER, yt://$YT_PROXY or .opsd/cluster)"


class CliError(Exception):
    """Bad input given to a command (a malformed schema, an invalid JSON line); the message names it."""


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Every option's help ends with its default, unless the help already speaks of it or there is none."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if any(action.default is nothing for nothing in (None, False, argparse.SUPPRESS)) or "default" in text \
                or not action.option_strings:
            return text
        return f"{text} (default: %(default)s)"


class Parser(argparse.ArgumentParser):
    """`opsd`'s parsers: every subparser (made with `add_subparsers`, which reuses this class) uses `HelpFormatter`."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", HelpFormatter)
        super().__init__(*args, **kwargs)


def open_cluster(args: argparse.Namespace, *, create: bool = False) -> Cluster:
    """The cluster named by `--cluster`, or the default one (see `streaming_core.cluster.default_uri`).

    Only commands that `create` may bring an embedded cluster into being; the others refuse a root where
    nothing exists, naming the path they looked for and the root they searched. Remembers on `args` which cluster
    it opened and why (`cluster_searched`), for "no such path" errors.
    """
    uri = resolve_uri(args.cluster)
    args.cluster_searched = f"{uri} ({_origin(args.cluster)})"
    try:
        return connect(uri, must_exist=not create)
    except NoSuchPathError as e:
        wanted = getattr(args, "path", None) or getattr(args, "queue", None)
        raise NoSuchPathError(f"{wanted}: {e}" if wanted else str(e)) from None


def resolve_target(args: argparse.Namespace, query: str = "QUERY") -> tuple[str | None, QueryTarget]:
    """(cluster URI, target) from `QUERY --config` or `--checkpoint`; `CliError` names what is missing. `query`: how
    the command spells the query's name (`QUERY`, `--query NAME`)."""
    if bool(args.query) == bool(args.checkpoint):
        raise CliError(f"name a query ({query} --config FILE) or a checkpoint (--checkpoint LOCATION), not both")
    if args.checkpoint:
        return args.cluster, QueryTarget(args.checkpoint, args.checkpoint, args.queue, args.consumer)
    if not args.config:
        raise CliError(f"query {args.query!r}: give the config file that names it (--config FILE)")
    try:
        config = load_config(args.config)
    except ConfigError as e:
        raise CliError(str(e)) from None
    found = [t for t in targets_for(config) if t.query == args.query]
    if not found:
        raise CliError(f"{args.config}: no pipeline with a checkpoint_location nor watch entry named {args.query!r}")
    return args.cluster or config.cluster, found[0]


def _origin(flag: str | None) -> str:
    if flag:
        return "--cluster"
    if os.environ.get("OPSD_CLUSTER"):
        return "from $OPSD_CLUSTER"
    if os.environ.get("YT_PROXY"):
        return "from $YT_PROXY"
    return "the default; choose another with --cluster or $OPSD_CLUSTER"


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
