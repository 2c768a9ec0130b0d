"""`opsd status`: a running daemon's pipelines, read from its `/status` endpoint."""

from __future__ import annotations

import argparse
import json
import urllib.error
import urllib.request

from rich import box
from rich.console import Console
from rich.table import Table

from opsd.cli.common import CliError
from opsd.observe.status import state_word

#: The table's columns and their alignment.
COLUMNS = (("query", "left"), ("state", "left"), ("batch", "right"), ("backlog", "right"), ("restarts", "right"),
           ("error", "left"))


def add_parser(subparsers: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    status = subparsers.add_parser("status", help="print a running daemon's pipelines")
    status.add_argument("--url", default="http://127.0.0.1:9108",
                        help="the daemon's HTTP address (http.host and http.port of its config)")
    status.add_argument("--json", action="store_true", help="print the raw /status document")
    status.set_defaults(handler=status_command)


def status_command(args: argparse.Namespace) -> int:
    try:
        with urllib.request.urlopen(args.url.rstrip("/") + "/status", timeout=5) as response:
            document = json.load(response)
    except (urllib.error.URLError, OSError) as e:
        raise CliError(f"no opsd daemon answers at {args.url}: {e}") from None
    if args.json:
        print(json.dumps(document, indent=2))
        return 0
    console = Console()
    console.print(status_table(document, console.width))
    return 0


def status_table(document: dict, width: int = 80) -> Table:
    """The `/status` document as a table `width` columns wide at most: one short column per fact, values never cut;
    the exception's class without its package (`--json` has it whole, with the message). Only the query name
    and the error fold when they are too long for `width`."""
    queries = document.get("queries", document)
    rows = [[name, state_word(q), _count(q.get("last_batch_id"), "-"), _count(q.get("backlog_rows"), "unknown"),
             _count(q.get("restarts"), "0"), (q.get("exception_class") or "").rpartition(".")[2]]
            for name, q in sorted(queries.items())]
    widths = [max([len(header)] + [len(row[i]) for row in rows]) for i, (header, _) in enumerate(COLUMNS)]
    # Each column is padded by one space on either side and separated from the next by one character; what the
    # fixed columns leave goes to the query name first, the error at least a third of it.
    room = width - sum(widths[1:-1]) - 3 * len(COLUMNS) + 1
    query, error = widths[0], widths[-1]
    error = min(error, max(len("error"), room // 3))
    query = max(len("query"), min(query, room - error))
    widths[0], widths[-1] = query, max(len("error"), min(widths[-1], room - query))
    table = Table(title="opsd pipelines", title_justify="left", box=box.SIMPLE_HEAD, show_edge=False)
    for (header, justify), column_width in zip(COLUMNS, widths, strict=True):
        table.add_column(header, justify=justify, overflow="fold", width=column_width)
    for row in rows:
        table.add_row(*row)
    return table


def _count(value: int | None, missing: str) -> str:
    return missing if value is None else f"{value:,}"
