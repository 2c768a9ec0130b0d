"""`opsd status`: a running daemon's pipelines, read from its `/status` endpoint."""

from __future__ import annotations

import argparse
import json
import urllib.error
import urllib.request

from rich import box
from rich.console import Console, Group
from rich.table import Table
from rich.text import Text

from opsd.cli.common import CliError
from opsd.observe.status import state_word
from opsd.telemetry.redaction import redact
from opsd.telemetry.terminal import Shown

#: The table's columns and their alignment.
COLUMNS = (("query", "left"), ("state", "left"), ("batch", "right"), ("backlog", "right"), ("restarts", "right"))


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
        print(json.dumps(redact(document), indent=2))
        return 0
    console = Console()
    console.print(status_view(document, console.width))
    return 0


def status_view(document: dict, width: int = 80) -> Group:
    """The `/status` document for people, `width` columns wide at most: a table with one short column per fact and
    values never cut (only a name too long for `width` folds), then a line per failed query naming its exception's
    class (`--json` has the message), then the Spark UI's address when it is on. Every value is data (a query
    attached with any name, a daemon's document): shown as text, never markup, control characters escaped."""
    shown = Shown()
    queries = document.get("queries", document)
    rows = [[shown.line(cell) for cell in (name, _state(q), _count(q.get("last_batch_id"), "-"),
                                           _count(q.get("backlog_rows"), "unknown"), _count(q.get("restarts"), "0"))]
            for name, q in sorted(queries.items())]
    widths = [max([len(header)] + [len(row[i]) for row in rows]) for i, (header, _) in enumerate(COLUMNS)]
    # Each column is padded by one space on either side and separated from the next by one character.
    widths[0] = max(len(COLUMNS[0][0]), min(widths[0], width - sum(widths[1:]) - 3 * len(COLUMNS) + 1))
    table = Table(title="opsd pipelines", title_justify="left", box=box.SIMPLE_HEAD, show_edge=False)
    for (header, justify), column_width in zip(COLUMNS, widths, strict=True):
        table.add_column(header, justify=justify, overflow="fold", width=column_width)
    for row in rows:
        table.add_row(*(Text(cell) for cell in row))
    errors = [Text(shown.line(f"{name}: {q['exception_class']}"), overflow="fold")
              for name, q in sorted(queries.items()) if q.get("exception_class")]
    ui = [Text(shown.line(f"Spark UI: {document['spark_ui']}"), overflow="fold")] if document.get("spark_ui") else []
    return Group(table, *errors, *ui)


def _state(query: dict) -> str:
    """`state_word` of a query's entry of the `/status` document."""
    return state_word(active=bool(query.get("active")), crash_loop=bool(query.get("crash_loop")),
                      stalled=bool(query.get("stalled")),
                      failed=bool(query.get("exception_class") or query.get("exception")),
                      started=query.get("started_at") is not None)


def _count(value: object, missing: str) -> str:
    if value is None:
        return missing
    return f"{value:,}" if isinstance(value, int) else str(value)
