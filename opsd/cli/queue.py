"""`opsd queue create | produce | inspect | trim | reshard`: queues (ordered dynamic tables) from the shell."""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from typing import Any, TextIO

from rich.console import Console
from rich.progress import Progress
from rich.table import Table

from opsd.cli.common import CliError, open_cluster, parse_schema
from opsd.cli.json_lines import json_line_batches
from opsd.cli.json_values import row_decoder
from opsd.demo.producer import Batch, batch_rows_for, generated_batches, paced
from opsd.telemetry.terminal import Shown
from streaming_core.cluster import Cluster, ClusterError, NotRegisteredError, RowError, SchemaError, TableSchema
from streaming_core.cluster.base import MAX_TABLET_COUNT, ORDERED, require_kind
from streaming_core.cluster.schema import to_arrow_table
from streaming_core.consumer import registration_seen
from streaming_core.offsets import unread_rows

DEFAULT_SCHEMA = "data:string"


def add_parser(subparsers: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    queue = subparsers.add_parser("queue", help="create, fill, inspect, trim and reshard queues")
    commands = queue.add_subparsers(dest="queue_command", required=True, metavar="COMMAND")

    create = commands.add_parser("create", parents=[common], help="create a queue")
    create.add_argument("path", help="queue path, e.g. //home/app/queue (parents are created)")
    create.add_argument("--partitions", type=int, default=1, help="number of tablets")
    create.add_argument("--schema", default=DEFAULT_SCHEMA,
                        help="JSON list of YT columns, or name:type,name:type")
    create.set_defaults(handler=create_queue)

    produce = commands.add_parser("produce", parents=[common], help="append rows: JSON lines or generated")
    produce.add_argument("path", help="the queue to append to")
    source = produce.add_mutually_exclusive_group()
    source.add_argument("--file", help="JSON lines to append (default: standard input)")
    source.add_argument("--count", type=int, help="generate this many rows that fit the schema instead")
    produce.add_argument("--rate", type=float, default=0, help="rows per second; 0 = as fast as possible")
    produce.add_argument("--partition", type=int, help="append to this partition (default: spread evenly)")
    produce.set_defaults(handler=produce_rows)

    inspect = commands.add_parser("inspect", parents=[common], help="rows, trimmed rows and consumer offsets")
    inspect.add_argument("path", help="the queue to inspect")
    inspect.add_argument("--json", action="store_true", help="print JSON for scripts")
    inspect.set_defaults(handler=inspect_queue)

    trim = commands.add_parser("trim", parents=[common], help="drop the head of partitions")
    trim.add_argument("path", help="the queue to trim")
    trim.add_argument("--partition", type=int, help="partition to trim (default with --to-consumer: all)")
    target = trim.add_mutually_exclusive_group(required=True)
    target.add_argument("--count", type=int, help="drop rows [0, COUNT) of the partition")
    target.add_argument("--to-consumer", metavar="CONSUMER", help="drop what this consumer has read")
    trim.add_argument("--past-vital-consumers", action="store_true",
                      help="drop rows that a consumer registered as --vital has not read yet (refused without it)")
    trim.set_defaults(handler=trim_queue)

    reshard = commands.add_parser("reshard", parents=[common], help="change the number of partitions (tablets)")
    reshard.add_argument("path", help="the queue to reshard")
    reshard.add_argument("--tablets", type=int, required=True,
                         help="the new number of partitions: more add empty ones, which running yt queries read "
                              "without a restart; fewer remove the last ones, only when every row of theirs is "
                              "trimmed (a query whose checkpoint read them must restart with a new checkpoint)")
    reshard.set_defaults(handler=reshard_queue)


# -- create -------------------------------------------------------------------------------------------


def create_queue(args: argparse.Namespace) -> int:
    schema = parse_schema(args.schema)
    keys = [c.get("name") for c in schema if c.get("sort_order")]
    if keys:
        raise CliError(f"--schema: column(s) {keys} have a sort_order, which makes a sorted table, not a queue "
                       f"(an ordered table): drop sort_order from the queue's columns, or make a sorted table with "
                       f"`opsd table create PATH --sorted-by ...`")
    if not 1 <= args.partitions <= MAX_TABLET_COUNT:
        raise CliError(f"--partitions must be from 1 to {MAX_TABLET_COUNT} (YTsaurus' tablet limit), "
                       f"got {args.partitions}")
    cluster = open_cluster(args, create=True)
    cluster.create("table", args.path, recursive=True, attributes={
        "dynamic": True, "schema": schema, "tablet_count": args.partitions})
    print(Shown().line(f"created queue {args.path} with {args.partitions} partition(s)"))
    return 0


# -- produce ------------------------------------------------------------------------------------------


def produce_rows(args: argparse.Namespace) -> int:
    """Append rows. A file is checked whole (JSON and schema) before the first insert, so bad input appends
    nothing; standard input may be endless, so a failure there says what was appended and how to resume."""
    for flag, value in (("--count", args.count), ("--rate", args.rate)):
        if value is not None and value < 0:
            raise CliError(f"{flag} must be >= 0, got {value}")
    cluster = open_cluster(args)
    schema = TableSchema.from_yt(require_kind(cluster, args.path, ORDERED).attributes["schema"])
    tablets = len(cluster.get_tablet_infos(args.path))
    if args.partition is not None and not 0 <= args.partition < tablets:
        raise CliError(f"--partition {args.partition}: {args.path} has partitions 0..{tablets - 1}")
    batch_rows = batch_rows_for(args.rate)
    if args.file is not None:
        with open(args.file, encoding="utf-8") as f:
            for batch in json_line_batches(f, args.file, batch_rows, row_decoder(schema)):
                _check_fits(schema, args.path, batch)
    with _input(args) as (lines, source):
        batches = (generated_batches(schema, args.count, batch_rows) if args.count is not None
                   else json_line_batches(lines, source, batch_rows, row_decoder(schema)))
        written = _append(cluster, args.path, paced(batches, args.rate), args.partition, args.count, source)
    print(Shown().line(f"appended {written} rows to {args.path}"))
    return 0


def _check_fits(schema: TableSchema, path: str, batch: Batch) -> None:
    try:
        to_arrow_table(schema, batch.rows, path)
    except SchemaError as e:
        raise SchemaError(f"{_culprit(e, batch)} [input lines {batch.first}-{batch.last}; nothing was appended]") \
            from None


def _culprit(error: Exception, batch: Batch | None) -> str:
    """The error, with a row at fault named by its input line (the one counting base of every message: from 1)."""
    if isinstance(error, RowError) and batch is not None:
        return error.at(f"input line {batch.number_of(error.row)}")
    return str(error)


@contextlib.contextmanager
def _input(args: argparse.Namespace) -> Iterator[tuple[TextIO, str]]:
    """The JSON-lines input and its name for messages (unused when generating rows)."""
    if args.file is None:
        yield sys.stdin, "<stdin>"
        return
    with open(args.file, encoding="utf-8") as f:
        yield f, args.file


def _append(cluster: Cluster, path: str, batches: Iterator[Batch], partition: int | None,
            total: int | None, source: str) -> int:
    """Insert each batch atomically; a failure says what was appended before it and how to resume."""
    written, done_through, current = 0, 0, None
    with _progress(total) as advance:
        try:
            for current in batches:
                cluster.insert_rows(path, current.rows, tablet_index=partition)
                written += len(current.rows)
                done_through = current.last
                advance(len(current.rows))
                current = None
        except (CliError, ClusterError) as e:
            rejected = f"input lines {current.first}-{current.last} rejected; " if current else ""
            again = SchemaError if isinstance(e, RowError) else type(e)  # the same kind of error, told in lines
            if not written:
                raise again(f"{_culprit(e, current)} [{rejected}nothing was appended]") from None
            raise again(f"{_culprit(e, current)} [{rejected}{written} rows, input lines 1-{done_through} of {source}, "
                        f"were appended before this; to resume, append from line {done_through + 1} on, e.g. "
                        f"tail -n +{done_through + 1} FILE | opsd queue produce {path}]") from None
    return written


@contextlib.contextmanager
def _progress(total: int | None) -> Iterator[Any]:
    """A function to report appended rows: a `rich` progress bar on a terminal, nothing otherwise."""
    if not sys.stderr.isatty():
        yield lambda rows: None
        return
    with Progress(console=Console(stderr=True)) as progress:
        task = progress.add_task("appending", total=total)
        yield lambda rows: progress.advance(task, rows)


# -- inspect ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ConsumerPosition:
    offset: int
    unread: int


@dataclass(frozen=True)
class PartitionReport:
    """One partition of `opsd queue inspect`: live rows and where each registered consumer stands."""

    partition: int
    total_rows: int
    trimmed_rows: int
    rows: int
    consumers: dict[str, ConsumerPosition] = field(default_factory=dict)


def queue_report(cluster: Cluster, path: str) -> list[PartitionReport]:
    """Per partition: total, trimmed and live rows; each registered consumer's offset and unread rows."""
    consumers = [r.consumer_path for r in cluster.list_queue_consumer_registrations(queue_path=path)]
    offsets = {c: cluster.get_consumer_offsets(c, path) for c in consumers}
    report = []
    for info in cluster.get_tablet_infos(path):
        positions = {}
        for consumer in consumers:
            offset = offsets[consumer].get(info.tablet_index, 0)
            positions[consumer] = ConsumerPosition(offset, unread_rows(offset, info.total_row_count,
                                                                       info.trimmed_row_count))
        report.append(PartitionReport(info.tablet_index, info.total_row_count, info.trimmed_row_count,
                                      info.total_row_count - info.trimmed_row_count, positions))
    return report


def inspect_queue(args: argparse.Namespace) -> int:
    cluster = open_cluster(args)
    report = queue_report(cluster, args.path)
    if args.json:
        print(json.dumps({"cluster": cluster.uri, "queue": args.path,
                          "partitions": [asdict(p) for p in report]}, indent=2))
    else:
        Console().print(_report_table(args.path, report, Shown()))
    return 0


def _report_table(path: str, report: list[PartitionReport], shown: Shown) -> Table:
    """Per partition its counters and each consumer's position; paths are shown as text, never markup."""
    consumers = list(report[0].consumers) if report else []
    table = Table(title=shown(f"queue {path}"))
    for header in ("partition", "rows", "trimmed", "total"):
        table.add_column(header, justify="right")
    for consumer in consumers:
        table.add_column(shown(f"{shown.line(consumer)}\noffset"), justify="right")
        table.add_column("unread", justify="right")
    for p in report:
        cells = [p.partition, p.rows, p.trimmed_rows, p.total_rows]
        for consumer in consumers:
            cells += [p.consumers[consumer].offset, p.consumers[consumer].unread]
        table.add_row(*(f"{c:,}" for c in cells))
    return table


# -- trim ---------------------------------------------------------------------------------------------


def trim_queue(args: argparse.Namespace) -> int:
    cluster = open_cluster(args)
    targets = trim_targets(cluster, args)
    trimmed = {t.tablet_index: t.trimmed_row_count for t in cluster.get_tablet_infos(args.path)}
    shown = Shown()
    for partition, count in targets.items():  # every partition is checked before any is trimmed
        if count > trimmed[partition] and not args.past_vital_consumers:
            cluster.check_vital_consumers(args.path, partition, count)
    for partition, count in targets.items():
        if count <= trimmed[partition]:
            print(shown.line(f"{args.path} partition {partition}: already trimmed to row {trimmed[partition]}; "
                             "nothing to do"))
            continue
        cluster.trim_rows(args.path, partition, count, past_vital_consumers=args.past_vital_consumers)
        print(shown.line(f"{args.path} partition {partition}: trimmed to row {count}"))
    return 0


def trim_targets(cluster: Cluster, args: argparse.Namespace) -> dict[int, int]:
    """Partition -> trimmed row count: `--count` for one partition, or a consumer's committed offsets."""
    partitions = {t.tablet_index for t in cluster.get_tablet_infos(args.path)}
    if args.partition is not None and args.partition not in partitions:
        raise CliError(f"--partition {args.partition}: {args.path} has partitions 0..{len(partitions) - 1}")
    if args.count is not None:
        if args.partition is None:
            raise CliError("trim --count needs --partition")
        if args.count < 0:
            raise CliError(f"--count must be >= 0, got {args.count}")
        return {args.partition: args.count}
    if not registration_seen(cluster, args.path, args.to_consumer):
        raise NotRegisteredError(f"consumer {args.to_consumer} is not registered for queue {args.path}")
    offsets = cluster.get_consumer_offsets(args.to_consumer, args.path)
    chosen = [args.partition] if args.partition is not None else sorted(partitions)
    return {p: offsets.get(p, 0) for p in chosen}


# -- reshard ------------------------------------------------------------------------------------------


def reshard_queue(args: argparse.Namespace) -> int:
    """`Cluster.reshard`: YTsaurus' unmount, `reshard_table`, mount; old partitions keep their rows and indexes."""
    if not 1 <= args.tablets <= MAX_TABLET_COUNT:
        raise CliError(f"--tablets must be from 1 to {MAX_TABLET_COUNT} (YTsaurus' tablet limit), got {args.tablets}")
    cluster = open_cluster(args)
    before = len(cluster.get_tablet_infos(args.path))  # names the path, or the kind of a table that is no queue
    shown = Shown()
    if before == args.tablets:
        print(shown.line(f"{args.path} has {before} partition(s) already; nothing to do"))
        return 0
    cluster.reshard(args.path, args.tablets)
    if args.tablets > before:
        print(shown.line(f"resharded {args.path} from {before} to {args.tablets} partitions: partitions "
                         f"{_span(before, args.tablets)} added, empty; running yt queries read them from their "
                         "consumer's offsets (0 unless moved), without a restart"))
    else:
        print(shown.line(f"resharded {args.path} from {before} to {args.tablets} partitions: partitions "
                         f"{_span(args.tablets, before)} removed (every row of theirs was trimmed); a query whose "
                         "checkpoint read them stops with QueueReshardedError: restart it with a new "
                         "checkpointLocation"))
    return 0


def _span(first: int, end: int) -> str:
    return str(first) if end - first == 1 else f"{first}-{end - 1}"
