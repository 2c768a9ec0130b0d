"""`opsd history QUERY`: why a query's caps and consumer are what they are — the tuner, heal and replan decisions
kept in its history table (`opsd.stores.history`), newest first.

The table is found from the config (`--config FILE`: `checks.history_path`, else next to the query's tuning
document), from a checkpoint (`--checkpoint LOCATION`: next to the tuning document of the consumer its offsets
name, or `--consumer`'s), or given (`--path`). `--json` prints the entries for scripts.
"""

from __future__ import annotations

import argparse
import datetime
import json
from collections.abc import Mapping
from typing import Any

from opsd.cli.blocks import Column, Item, console, view, view_width
from opsd.cli.common import CliError
from opsd.config.load import ConfigError, load_config
from opsd.observe.status import jsonable
from opsd.results.history import HistoryEntry
from opsd.stores.history.collect import read_history
from opsd.stores.history.table import history_path, history_paths
from opsd.telemetry.redaction import redact
from opsd.telemetry.terminal import Shown
from streaming_core.checkpoint import read_checkpoint
from streaming_core.cluster import connect, default_uri
from streaming_core.tuning import default_tuning_path

#: Entries printed unless `--limit` says otherwise.
SHOW_LIMIT = 50


def add_parser(subparsers: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    history = subparsers.add_parser("history", parents=[common],
                                    help="a query's tuner, heal and replan decisions, newest first")
    history.add_argument("query", help="the query (a pipeline or watch name)")
    where = history.add_mutually_exclusive_group(required=True)
    where.add_argument("--config", help="the opsd config file that names QUERY")
    where.add_argument("--checkpoint", metavar="LOCATION", help="the query's checkpoint location")
    where.add_argument("--path", help="the history table itself")
    history.add_argument("--consumer", help="with --checkpoint: the consumer (default: the offsets' consumer_path)")
    history.add_argument("--limit", type=int, default=SHOW_LIMIT, help="print at most this many decisions")
    history.add_argument("--json", action="store_true", help="print JSON for scripts")
    history.set_defaults(handler=show_history)


def resolve_table(args: argparse.Namespace) -> tuple[str | None, str]:
    """(cluster URI, history table) of the query; `CliError` says what is missing."""
    if args.path:
        return args.cluster, args.path
    if args.checkpoint:
        consumer = args.consumer or next(
            (q.consumer_path for q in read_checkpoint(args.checkpoint, args.cluster).queues if q.consumer_path), None)
        path = history_path(None, default_tuning_path(consumer))
        if path is None:
            raise CliError(f"{args.checkpoint}: its offsets name no consumer_path (SPYT's do not): give --consumer")
        return args.cluster, path
    try:
        config = load_config(args.config)
    except ConfigError as e:
        raise CliError(str(e)) from None
    paths = history_paths(config)
    if args.query not in paths:
        raise CliError(f"{args.config}: no pipeline nor watch entry named {args.query!r} with a history table "
                       "(a yt source or sink, a watch consumer, or checks.history_path)")
    return args.cluster or config.cluster, paths[args.query]


def show_history(args: argparse.Namespace) -> int:
    if args.limit < 1:
        raise CliError(f"--limit must be at least 1, got {args.limit}")
    uri, path = resolve_table(args)
    with connect(uri or default_uri()) as cluster:
        try:
            entries = read_history(cluster, path, args.query, args.limit)
        except ValueError as e:
            raise CliError(str(e)) from None
    if args.json:
        print(json.dumps(redact(jsonable([e.to_json() for e in entries])), indent=2))
    elif not entries:
        print(Shown().line(f"{args.query}: no decisions in {path}"))
    else:
        out = console()
        for part in view(COLUMNS, history_items(entries, Shown()), view_width(out), title="decisions, newest first"):
            out.print(part)
    return 0


#: Per decision, newest first: when, what about, the change, its outcome and why.
COLUMNS = (Column("when (UTC)"), Column("decision"), Column("before -> after"), Column("outcome"))


def history_items(entries: list[HistoryEntry], shown: Shown) -> list[Item]:
    """One item per decision, named by its time (UTC); every value is text from data (never markup), reasons in
    words where this version knows them."""
    items = []
    for e in entries:
        when = datetime.datetime.fromtimestamp(e.at, datetime.UTC).strftime("%Y-%m-%d %H:%M:%S")
        reason = e.reason.words
        outcome = e.outcome if e.reason == e.outcome else f"{e.outcome}: {reason}"
        items.append(Item(when, (shown.line(f"{e.kind.value} {e.subject}"),
                                 shown.line(f"{compact(e.before)} -> {compact(e.after)}"), shown.line(outcome))))
    return items


def compact(value: Any) -> str:
    """A value in few characters: `-` for none, `k:v k:v` for a map."""
    if value is None:
        return "-"
    if isinstance(value, Mapping):
        return " ".join(f"{k}:{compact(v)}" for k, v in value.items())
    return str(value)
