"""`opsd consumer create | register`: consumer tables and their queue registrations from the shell."""

from __future__ import annotations

import argparse

from opsd.cli.common import open_cluster
from opsd.telemetry.terminal import Shown


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


def create_consumer(args: argparse.Namespace) -> int:
    open_cluster(args, create=True).create_consumer(args.path, recursive=True)
    print(Shown().line(f"created consumer {args.path}"))
    return 0


def register_consumer(args: argparse.Namespace) -> int:
    open_cluster(args).register_queue_consumer(args.queue, args.consumer, vital=args.vital)
    print(Shown().line(f"registered {args.consumer} for {args.queue}" + (" (vital)" if args.vital else "")))
    return 0
