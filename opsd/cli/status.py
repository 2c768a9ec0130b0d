"""`opsd status`: a running daemon's pipelines, read from its `/status` endpoint.

The daemon is found at `--url`, or at the address its config file names (`--config`). Below `WIDE` columns each
query is a block of lines (as `kubectl describe` prints), its state first; wider, one table row per query. Nothing
is ever cut: a value too long for the terminal folds. A failed query shows its error and whether opsd stopped it for
good. Exit codes: 0 when no pipeline has failed, `PIPELINE_FAILED` when one has (a script can page on it), 1 when
no daemon answers.
"""

from __future__ import annotations

import argparse
import json
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping
from typing import Any

from rich import box
from rich.console import Console, Group
from rich.table import Table
from rich.text import Text

from opsd.cli.common import DEFAULT_URL, CliError
from opsd.config.load import load_config
from opsd.config.models import OpsdConfig
from opsd.config.spark import EVERY_INTERFACE, LOOPBACK
from opsd.observe.status import state_word
from opsd.telemetry.redaction import redact
from opsd.telemetry.terminal import Shown

#: The table's columns and their alignment.
COLUMNS = (("query", "left"), ("state", "left"), ("batch", "right"), ("last batch", "right"),
           ("backlog", "right"), ("restarts", "right"))
#: Terminals at least this wide get the table; narrower ones one block per query.
WIDE = 120
#: The exit code when a pipeline has failed (the daemon answered).
PIPELINE_FAILED = 3


def add_parser(subparsers: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    status = subparsers.add_parser("status", help="print a running daemon's pipelines")
    where = status.add_mutually_exclusive_group()
    where.add_argument("--url", default=DEFAULT_URL, help="the daemon's HTTP address")
    where.add_argument("--config", metavar="FILE", help="the daemon's config: its http.host and http.port")
    status.add_argument("--json", action="store_true", help="print the raw /status document")
    status.set_defaults(handler=status_command)


def status_command(args: argparse.Namespace) -> int:
    url = (daemon_url(load_config(args.config)) if args.config else args.url).rstrip("/")
    try:
        with urllib.request.urlopen(url + "/status", timeout=5) as response:
            document = json.load(response)
    except (urllib.error.URLError, OSError) as e:
        how = "" if args.config else " (a daemon with another http.port: --config ITS_CONFIG.yaml, or --url)"
        raise CliError(f"no opsd daemon answers at {url}: {getattr(e, 'reason', e)}; is `opsd run` running?"
                       f"{how}") from None
    if args.json:
        print(json.dumps(redact(document), indent=2))
    else:
        console = Console()
        console.print(status_view(document, console.width))
    failed = any(query_state(q) == "failed" for q in _queries(document).values())
    return PIPELINE_FAILED if failed else 0


def daemon_url(config: OpsdConfig) -> str:
    """Where a client on this host reaches the daemon that runs `config`."""
    host = config.http.host
    host = LOOPBACK if host in (*EVERY_INTERFACE, "") else f"[{host}]" if ":" in host else host
    return f"http://{host}:{config.http.port}"


def status_view(document: dict, width: int = 80, *, now: Callable[[], float] = time.time) -> Group:
    """The `/status` document for people, `width` columns wide at most (see the module docstring), then the Spark
    UI's address when it is on. Every value is data (a query attached with any name, a daemon's document): shown as
    text, never markup, control characters escaped."""
    shown = Shown()
    queries = sorted(_queries(document).items())
    facts = [(name, _facts(q, now())) for name, q in queries]
    ui = [Text(shown.line(f"Spark UI: {document['spark_ui']}"), overflow="fold")] if document.get("spark_ui") else []
    if not facts:
        return Group(Text("no pipelines yet"), *ui)
    parts = _table(facts, width, shown) if width >= WIDE else _blocks(facts, shown)
    return Group(*parts, *ui)


def _queries(document: Mapping[str, Any]) -> Mapping[str, Mapping[str, Any]]:
    return document.get("queries", document)


def _facts(query: Mapping[str, Any], now: float) -> dict[str, str]:
    """One query's facts in words, by column; the failure's lines (error, whether final) under `failure`."""
    last = query.get("last_progress_at")
    facts = {"state": query_state(query), "batch": _count(query.get("last_batch_id"), "-"),
             "last batch": _age(now - last) if isinstance(last, int | float) else "-",
             "backlog": _count(query.get("backlog_rows"), "unknown"), "restarts": _count(query.get("restarts"), "0")}
    if facts["state"] == "failed":
        error = query.get("error") or query.get("exception_class") or "unknown error"
        final = query.get("permanent_failure")
        facts["failure"] = f"{error}\n" + (f"stopped for good: {final}" if final else "opsd restarts it")
    return facts


def _table(facts: list[tuple[str, dict[str, str]]], width: int, shown: Shown) -> list[Any]:
    rows = [[shown.line(name)] + [shown.line(f[header]) for header, _ in COLUMNS[1:]] for name, f in facts]
    widths = [max([len(header)] + [len(row[i]) for row in rows]) for i, (header, _) in enumerate(COLUMNS)]
    # Each column is padded by one space on either side and separated from the next by one character.
    widths[0] = max(len(COLUMNS[0][0]), min(widths[0], width - sum(widths[1:]) - 3 * len(COLUMNS) + 1))
    table = Table(title="opsd pipelines", title_justify="left", box=box.SIMPLE_HEAD, show_edge=False)
    for (header, justify), column_width in zip(COLUMNS, widths, strict=True):
        table.add_column(header, justify=justify, overflow="fold", width=column_width)
    for row in rows:
        table.add_row(*(Text(cell) for cell in row))
    failures = [Text(f"{shown.line(name)}: " + "; ".join(shown.line(line) for line in f["failure"].splitlines()),
                     overflow="fold") for name, f in facts if "failure" in f]
    return [table, *failures]


def _blocks(facts: list[tuple[str, dict[str, str]]], shown: Shown) -> list[Any]:
    """One block per query: its name, then a line per fact, state first, the failure's lines last."""
    label = max(len(header) for header, _ in COLUMNS[1:]) + 2
    parts: list[Any] = []
    for name, f in facts:
        lines = [shown.line(name)] + [f"  {header.ljust(label)}{shown.line(f[header])}" for header, _ in COLUMNS[1:]]
        if "failure" in f:
            error, final = f["failure"].split("\n", 1)
            lines += [f"  {'error'.ljust(label)}{shown.line(error)}", f"  {''.ljust(label)}{shown.line(final)}"]
        parts.append(Text("\n".join(lines) + "\n", overflow="fold"))
    return parts


def query_state(query: Mapping[str, Any]) -> str:
    """`state_word` of a query's entry of the `/status` document."""
    return state_word(active=bool(query.get("active")), crash_loop=bool(query.get("crash_loop")),
                      stalled=bool(query.get("stalled")),
                      failed=bool(query.get("exception_class") or query.get("exception")),
                      started=query.get("started_at") is not None)


def _age(seconds: float) -> str:
    """`4 s ago`, `12 min ago`, `3 h ago`, `2 d ago`."""
    seconds = max(0.0, seconds)
    for unit, size in (("d", 86_400), ("h", 3_600), ("min", 60)):
        if seconds >= size:
            return f"{int(seconds // size)} {unit} ago"
    return f"{int(seconds)} s ago"


def _count(value: object, missing: str) -> str:
    if value is None:
        return missing
    return f"{value:,}" if isinstance(value, int) else str(value)
