"""What every `opsd` subcommand module shares: the parser and help style, the input error type, and how `--cluster`
is opened (and named in errors)."""

from __future__ import annotations

import argparse
import os
from typing import Any

from streaming_core.cluster import Cluster, connect, resolve_uri

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


def open_cluster(args: argparse.Namespace) -> Cluster:
    """The cluster named by `--cluster`, or the default one (see `streaming_core.cluster.default_uri`).

    Remembers on `args` which cluster it opened and why (`cluster_searched`), for "no such path" errors.
    """
    uri = resolve_uri(args.cluster)
    args.cluster_searched = f"{uri} ({_origin(args.cluster)})"
    return connect(uri)


def _origin(flag: str | None) -> str:
    if flag:
        return "--cluster"
    if os.environ.get("OPSD_CLUSTER"):
        return "from $OPSD_CLUSTER"
    if os.environ.get("YT_PROXY"):
        return "from $YT_PROXY"
    return "the default; choose another with --cluster or $OPSD_CLUSTER"
