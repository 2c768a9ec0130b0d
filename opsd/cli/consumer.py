"""`opsd consumer create | register | seek`: consumer tables, their queue registrations, and setting where a consumer
stands (backwards too) from the shell.

A seek moves every partition in one compare-and-set transaction (`streaming_core.consumer.seek_consumer`), never
past the queue's end nor below its trim. A move backwards is checked against the query's checkpoint (`--checkpoint
LOCATION` or `--query NAME --config FILE`): below the end of its committed batch it is refused unless
`--past-checkpoint` (the query would not read those rows again under that checkpoint: it starts at the checkpoint
when the consumer is behind it; only a new checkpointLocation reads them again). A consumer past the queue's end
stands on no row of this queue and may be moved back without a checkpoint.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping

from opsd.cli.common import CliError, open_cluster, resolve_target
from opsd.telemetry.terminal import Shown
from streaming_core.checkpoint import read_checkpoint
from streaming_core.cluster import Cluster
from streaming_core.consumer import planned_moves, seek_consumer

#: `--to` targets: per partition, the first row still there (the trimmed row count) or the end (the row count).
TO_TRIM, TO_END = "trim", "end"


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
    where = seek.add_mutually_exclusive_group(required=True)
    where.add_argument("--offset", type=int,
                       help="the next row to read (0: the queue's first row); at most the partition's row count")
    where.add_argument("--to", choices=(TO_TRIM, TO_END),
                       help="trim: each partition's first row still there (skips nothing that exists); "
                            "end: each partition's row count (skips every unread row)")
    seek.add_argument("--partition", type=int, action="append",
                      help="a partition to move (repeat for several; default: every partition)")
    seek.add_argument("--dry-run", action="store_true", help="say what would move, change nothing")
    seek.add_argument("--checkpoint", metavar="LOCATION",
                      help="the query's checkpoint: a move back below its committed end is refused")
    seek.add_argument("--query", metavar="NAME", help="the query's pipeline or watch name in --config, instead of "
                                                      "--checkpoint")
    seek.add_argument("--config", help="the opsd config file that names --query")
    seek.add_argument("--past-checkpoint", action="store_true",
                      help="move back below the checkpoint's committed end anyway, or without a checkpoint to check "
                           "(for a query restarted with a new checkpointLocation: it reads those rows again)")
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
    if args.offset is not None and args.offset < 0:
        raise CliError(f"--offset {args.offset}: an offset is a row number, 0 or more")
    checkpoint = None
    if args.checkpoint or args.query:
        uri, target = resolve_target(argparse.Namespace(**{**vars(args), "queue": None, "consumer": None}),
                                     query="--query NAME")
        if target.queue not in (None, args.queue):
            raise CliError(f"{args.config}: query {args.query!r} reads {target.queue}, not {args.queue}")
        args.cluster, checkpoint = uri, target.checkpoint
    cluster = open_cluster(args)
    infos = {t.tablet_index: t for t in cluster.get_tablet_infos(args.queue)}

    def offset(p: int) -> int:  # an unknown partition: `seek_consumer` names it, whatever its target
        if args.offset is not None or p not in infos:
            return args.offset or 0
        return infos[p].trimmed_row_count if args.to == TO_TRIM else infos[p].total_row_count

    target = {p: offset(p) for p in (args.partition if args.partition is not None else sorted(infos))}
    if not args.past_checkpoint:
        check_backwards(cluster, args.queue, args.consumer, target, checkpoint)
    moves = seek_consumer(cluster, args.consumer, args.queue, target, dry_run=args.dry_run)
    said = []
    if moves:
        listed = ", ".join(f"partition {p} {old} -> {new}" for p, (old, new) in sorted(moves.items()))
        said.append(f"{'would move' if args.dry_run else 'moved'} {listed}")
    if set(target) - set(moves):
        said.append("already " + ", ".join(f"partition {p} at {n}" for p, n in sorted(target.items())
                                           if p not in moves))
    print(Shown().line(f"{args.consumer} on {args.queue}: " + "; ".join(said)))
    return 0


def check_backwards(cluster: Cluster, queue: str, consumer: str, target: Mapping[int, int],
                    checkpoint: str | None) -> None:
    """`CliError` for a move back below the checkpoint's committed end (or with no checkpoint to check against),
    naming the partition; a consumer past the queue's end stands on no row of it and may move back."""
    rows = {t.tablet_index: t.total_row_count for t in cluster.get_tablet_infos(queue)}
    back = {p: m for p, m in planned_moves(cluster.get_consumer_offsets(consumer, queue), target,
                                           backwards=True).items()
            if m[1] < m[0] and m[0] <= rows.get(p, m[0])}
    if not back:
        return
    if checkpoint is None:
        p, (old, new) = min(back.items())
        raise CliError(f"{queue}: partition {p}: moving {consumer} back from {old} to {new}: give the query's "
                       "checkpoint to check the move against (--checkpoint LOCATION, or --query NAME --config FILE), "
                       "or --past-checkpoint if the query restarts with a new checkpointLocation")
    found = read_checkpoint(checkpoint, cluster.uri)
    committed = found.committed.queue(queue) if found.committed else None
    if found.committed is not None and committed is None:
        raise CliError(f"{checkpoint}: batch {found.committed_batch} has no offsets for {queue}: is it this "
                       "query's checkpoint?")
    ends = {p: last + 1 for p, last in committed.partitions.items()} if committed else {}
    for p, (old, new) in sorted(back.items()):
        if new < ends.get(p, 0):
            raise CliError(
                f"{queue}: partition {p}: moving {consumer} back from {old} to {new} is below row {ends[p]}, where "
                f"the checkpoint's committed batch {found.committed_batch} ends: the query would not read rows "
                f"[{new}, {ends[p]}) again under it (it starts at the checkpoint when the consumer is behind); "
                "give --past-checkpoint to move it anyway (and restart the query with a new checkpointLocation "
                "to read them again); nothing moved")
