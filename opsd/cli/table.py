"""`opsd table create | read`: output tables (ordered or sorted dynamic, static) made and read from the shell.

`opsd table read --json` prints JSON lines in the form `opsd queue produce` reads (`json_values`), so a
table's rows can be piped into a queue.
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
from rich.console import Console
from rich.table import Table

from opsd.cli.common import CliError, open_cluster, parse_schema
from opsd.cli.json_values import row_encoder
from opsd.telemetry.terminal import Shown, json_line
from streaming_core.cluster import Cluster, TableSchema
from streaming_core.cluster.base import MAX_TABLET_COUNT, ORDERED, SORTED, STATIC, TABLE, require_kind

#: Rows `opsd table read` prints unless `--limit` or `--all` says otherwise.
READ_LIMIT = 100


def add_parser(subparsers: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    table = subparsers.add_parser("table", help="create and read output tables")
    commands = table.add_subparsers(dest="table_command", required=True, metavar="COMMAND")

    create = commands.add_parser("create", parents=[common], help="create a dynamic (default) or static table")
    create.add_argument("path", help="table path, e.g. //home/app/result (parents are created)")
    create.add_argument("--schema", required=True, help="JSON list of YT columns, or name:type,name:type")
    create.add_argument("--sorted-by", metavar="K1,K2", help="key columns (ascending): a sorted table")
    create.add_argument("--tablets", type=int, help="tablets of a dynamic table (default 1)")
    create.add_argument("--static", action="store_true", help="a static table instead of a dynamic one")
    create.set_defaults(handler=create_table)

    read = commands.add_parser("read", parents=[common], help="print a table's rows")
    read.add_argument("path", help="the table to read")
    how_many = read.add_mutually_exclusive_group()
    how_many.add_argument("--limit", type=int, default=READ_LIMIT, help="print at most this many rows")
    how_many.add_argument("--all", action="store_true", help="print every row")
    read.add_argument("--json", action="store_true", help="JSON lines, as `opsd queue produce` reads them")
    read.set_defaults(handler=read_table)


# -- create -------------------------------------------------------------------------------------------


def create_table(args: argparse.Namespace) -> int:
    attributes = table_attributes(parse_schema(args.schema), _key_list(args.sorted_by), static=args.static,
                                  tablets=args.tablets)
    cluster = open_cluster(args, create=True)
    cluster.create(TABLE, args.path, recursive=True, attributes=attributes)
    kind = require_kind(cluster, args.path, ORDERED, SORTED, STATIC).kind
    keys = TableSchema.from_yt(attributes["schema"]).key_columns
    print(Shown().line(f"created {kind} table {args.path}" + (f" keyed by {', '.join(keys)}" if keys else "")
                       + (f" with {attributes['tablet_count']} tablet(s)" if "tablet_count" in attributes else "")))
    return 0


def _key_list(text: str | None) -> list[str]:
    keys = [k.strip() for k in (text or "").split(",") if k.strip()]
    if text is not None and not keys:
        raise CliError("--sorted-by: give key columns, e.g. --sorted-by user,ts")
    return keys


def table_attributes(schema: list[dict[str, Any]], keys: list[str], *, static: bool,
                     tablets: int | None) -> dict[str, Any]:
    """The new table's attributes: `keys` become the first columns, ascending; errors name the option."""
    names = [c.get("name") for c in schema]
    unknown = [k for k in keys if k not in names]
    if unknown:
        raise CliError(f"--sorted-by: {unknown} are not columns of --schema {names}")
    if static and tablets is not None:
        raise CliError("--tablets: static tables have no tablets (drop --static for a dynamic table)")
    if tablets is not None and not 1 <= tablets <= MAX_TABLET_COUNT:
        raise CliError(f"--tablets must be from 1 to {MAX_TABLET_COUNT} (YTsaurus' tablet limit), got {tablets}")
    keyed = [{**next(c for c in schema if c.get("name") == k), "sort_order": "ascending"} for k in keys]
    attributes: dict[str, Any] = {"schema": keyed + [c for c in schema if c.get("name") not in keys],
                                  "dynamic": not static}
    if not static and (tablets is not None or not keys):
        attributes["tablet_count"] = tablets or 1
    return attributes


# -- read ---------------------------------------------------------------------------------------------


def read_table(args: argparse.Namespace) -> int:
    """The rows, at most `--limit` of them (`READ_LIMIT` unless told), then how many were shown (of how many, when
    rows were left out: below the table, or on stderr beside JSON lines so that they stay pipeable)."""
    if args.limit < 0:
        raise CliError(f"--limit must be zero or more, got {args.limit}")
    limit = None if args.all else args.limit
    cluster = open_cluster(args)
    info = require_kind(cluster, args.path, ORDERED, SORTED, STATIC)
    schema = TableSchema.from_yt(info.attributes["schema"])
    encode = row_encoder(schema)
    # One row past the limit tells whether rows were left out without counting the table.
    read = table_batches(cluster, args.path, info.kind, None if limit is None else limit + 1)
    rows = (encode(r) for batch in read for r in batch.to_pylist())
    shown = 0
    if args.json:
        for row in itertools.islice(rows, limit):
            print(json_line(row))
            shown += 1
    else:
        listed = list(itertools.islice(rows, limit))
        shown = len(listed)
        Console().print(_rows_table(args.path, schema.names, listed, Shown()))
    cut = next(rows, None) is not None
    summary = _summary(shown, _row_count(cluster, args.path, info.kind) if cut else shown, cut)
    if cut or not args.json:
        print(summary, file=sys.stderr if args.json else sys.stdout)
    return 0


def _row_count(cluster: Cluster, path: str, kind: str | None) -> int | None:
    """The table's rows when the cluster keeps the count (a queue's tablets, a static table), else None: a sorted
    dynamic table's count is a full read on YTsaurus."""
    if kind == ORDERED:
        return sum(t.total_row_count - t.trimmed_row_count for t in cluster.get_tablet_infos(path))
    return cluster.get(path + "/@row_count") if kind == STATIC else None


def _summary(shown: int, total: int | None, cut: bool) -> str:
    """`100 of 10801 rows (--all prints every row)`, or `3 rows`."""
    noun = "row" if (total if total is not None else shown) == 1 else "rows"
    if not cut:
        return f"{shown} {noun}"
    return f"{shown} of {total if total is not None else 'more'} {noun} (--limit N or --all prints more)"


def table_batches(cluster: Cluster, path: str, kind: str | None, limit: int | None) -> Iterator[pa.RecordBatch]:
    """The table's rows (a queue's tablet after tablet), at most `limit` of them."""
    if kind == ORDERED:
        batches = (b for t in cluster.get_tablet_infos(path)
                   for b in cluster.read_kept(path, t.tablet_index, t.trimmed_row_count, t.total_row_count))
    else:
        batches = cluster.read_table(path)
    left = limit
    for batch in batches:
        if left is not None:
            batch = batch.slice(0, left)
            left -= batch.num_rows
        if batch.num_rows:
            yield batch
        if left == 0:
            return


def _rows_table(path: str, columns: list[str], rows: list[dict[str, Any]], shown: Shown) -> Table:
    """The rows as a table: values are data, shown as text (never markup), control characters escaped."""
    table = Table(title=shown(f"table {path}"))
    for column in columns:
        table.add_column(shown(column))
    for row in rows:
        table.add_row(*(shown(_cell(row.get(c))) for c in columns))
    return table


def _cell(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
