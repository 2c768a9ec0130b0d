"""`opsd producer`: queue producers (YTsaurus' exactly-once writers, the `yt` sink's producer mode): create one, look
at its sessions, and remove the sessions of a deleted query (`streaming_core.sink_producer`).

A session's `sequence_number` is the last row it wrote: for the sink's batch numbering `batch * 2^32 + place`, shown
as `batch B row R`; its `epoch` counts how often it was opened again (each task start of the query opens it).
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from opsd.cli.common import CliError, open_cluster
from opsd.telemetry.terminal import Shown
from streaming_core.cluster import Cluster
from streaming_core.options import SinkOptions
from streaming_core.sink_producer import SEQUENCE_STRIDE, remove_sessions, session_prefix, stored_sessions


def add_parser(subparsers: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    producer = subparsers.add_parser("producer", help="create queue producers, inspect and remove their sessions")
    commands = producer.add_subparsers(dest="producer_command", required=True, metavar="COMMAND")
    create = commands.add_parser("create", parents=[common], help="create a queue producer table")
    create.add_argument("path", help="producer path, e.g. //home/app/producer (parents are created)")
    create.set_defaults(handler=create_producer)
    inspect = commands.add_parser("inspect", parents=[common], help="show a producer's sessions")
    inspect.add_argument("path", help="the producer table")
    inspect.add_argument("--queue", help="only the sessions writing this queue")
    inspect.add_argument("--json", action="store_true", help="one JSON object per session")
    inspect.set_defaults(handler=inspect_producer)
    remove = commands.add_parser("remove-sessions", parents=[common],
                                 help="forget a deleted query's sessions (a new query of that name starts afresh)")
    remove.add_argument("path", help="the producer table")
    remove.add_argument("queue", help="the queue the query wrote")
    named = remove.add_mutually_exclusive_group(required=True)
    named.add_argument("--session", metavar="NAME", help="the query's producer_session option")
    named.add_argument("--checkpoint", metavar="LOCATION", help="the query's checkpointLocation (sessions named by it)")
    remove.set_defaults(handler=remove_producer_sessions)


def create_producer(args: argparse.Namespace) -> int:
    cluster = open_cluster(args, create=True)
    cluster.require_queue_producers()
    cluster.create_queue_producer(args.path, recursive=True)
    print(Shown().line(f"created queue producer {args.path}"))
    return 0


def sessions(cluster: Cluster, path: str, queue: str | None) -> list[dict[str, Any]]:
    """The producer's sessions (of `queue` only, when given), as `--json` shows them."""
    return [{"queue": s.queue, "session": s.session, "epoch": s.epoch, "sequence_number": s.sequence_number,
             "user_meta": s.user_meta} for s in stored_sessions(cluster, path, queue)]


def inspect_producer(args: argparse.Namespace) -> int:
    found = sessions(open_cluster(args), args.path, args.queue)
    shown = Shown()
    if args.json:
        for session in found:
            print(shown.line(json.dumps(session, sort_keys=True)))
        return 0
    if not found:
        print(shown.line(f"{args.path}: no sessions"))
    for s in found:
        number = s["sequence_number"]
        where = "nothing written" if number < 0 else \
            f"last row {number} (batch {number // SEQUENCE_STRIDE} row {number % SEQUENCE_STRIDE})"
        print(shown.line(f"{s['queue']}  session {s['session']}  epoch {s['epoch']}  {where}  meta {s['user_meta']}"))
    return 0


def remove_producer_sessions(args: argparse.Namespace) -> int:
    if args.session is not None:
        prefix = args.session
    else:
        try:
            prefix = session_prefix(SinkOptions(path=args.queue, cluster="", checkpoint_location=args.checkpoint))
        except ValueError as e:
            raise CliError(str(e)) from None
    removed = remove_sessions(open_cluster(args), args.path, args.queue, prefix)
    print(Shown().line(f"removed {len(removed)} session(s) of {args.queue} from {args.path}: "
                       f"{', '.join(removed) or 'none'}"))
    return 0
