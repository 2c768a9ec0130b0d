"""`opsd status`: a running daemon's pipelines, read from its `/status` endpoint."""

from __future__ import annotations

import argparse
import json
import urllib.error
import urllib.request

from rich.console import Console
from rich.table import Table

from opsd.cli.common import CliError


def add_parser(subparsers: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    status = subparsers.add_parser("status", help="print a running daemon's pipelines")
    status.add_argument("--url", default="http://127.0.0.1:9108", help="the daemon's HTTP address")
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
    Console().print(status_table(document))
    return 0


def status_table(document: dict) -> Table:
    """The `/status` document as a table for people."""
    table = Table(title="opsd pipelines")
    for column in ("query", "active", "last batch", "backlog rows", "restarts", "stalled", "oom risk", "exception"):
        table.add_column(column)
    queries = document.get("queries", document)
    for name, q in sorted(queries.items()):
        risk = q.get("oom_risk")
        table.add_row(name, str(q.get("active")), str(q.get("last_batch_id")), str(q.get("backlog_rows")),
                      str(q.get("restarts")), str(q.get("stalled")), "" if risk is None else f"{risk:.2f}",
                      (q.get("exception_class") or ""))
    return table
