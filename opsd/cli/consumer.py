"""`opsd consumer create | register | seek`: consumer tables, their queue registrations, and setting where a consumer
stands (backwards too) from the shell."""

from __future__ import annotations

import argparse

from opsd.cli.common import CliError, open_cluster
from opsd.telemetry.terminal import Shown
from streaming_core.consumer import seek_consumer


def add_parser(subparsers: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    consumer = subparsers.add_parser("consumer", help="create consumers and register them for queues")
    commands = consumer.add_subparsers(dest="consumer_command", required=True, metavar="COMMAND")

    create = commands.add_parser("create", parents=[common], help="create a consumer table")
    create.add_argument("path", help="consumer path, e.g. //home/app/consumer (parents are created)")
    create.set_defaults(handler=create_consumer)

    register = commands.add_parser("register", parents=[common], help="register a consumer for a queue")
    register.add_argument("queue", help="the queue the consumer reads")
    register.add_argument("consumer", help="the consumer table (made with `opsd consumer create`)")
    register.add_argument("--vital", action="store_true", help="the queue must not be trimmed past it")
    register.set_defaults(handler=register_consumer)

    seek = commands.add_parser("seek", parents=[common],
                               help="set a consumer's offset on a queue, backwards too (stop its query first)")
    seek.add_argument("queue", help="the queue the consumer reads")
    seek.add_argument("consumer", help="the consumer table")
    seek.add_argument("--offset", type=int, required=True,
                      help="the next row to read (0: the queue's first row); at most the partition's row count")
    seek.add_argument("--partition", type=int, action="append",
                      help="a partition to move (repeat for several; default: every partition)")
    seek.set_defaults(handler=seek_consumer_offsets)


def create_consumer(args: argparse.Namespace) -> int:
    open_cluster(args, create=True).create_consumer(args.path, recursive=True)
    print(Shown().line(f"created consumer {args.path}"))
    return 0


def register_consumer(args: argparse.Namespace) -> int:
    open_cluster(args).register_queue_consumer(args.queue, args.consumer, vital=args.vital)
    print(Shown().line(f"registered {args.consumer} for {args.queue}" + (" (vital)" if args.vital else "")))
    return 0


def seek_consumer_offsets(args: argparse.Namespace) -> int:
    if args.offset < 0:
        raise CliError(f"--offset {args.offset}: an offset is a row number, 0 or more")
    cluster = open_cluster(args)
    partitions = args.partition if args.partition is not None else \
        [t.tablet_index for t in cluster.get_tablet_infos(args.queue)]
    moves = seek_consumer(cluster, args.consumer, args.queue, dict.fromkeys(partitions, args.offset))
    listed = ", ".join(f"partition {p} {old} -> {new}" for p, (old, new) in sorted(moves.items()))
    print(f"{args.consumer} on {args.queue}: " + (f"moved {listed}" if moves else f"already at {args.offset}"))
    return 0
