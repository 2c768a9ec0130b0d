"""`opsd status`: a running daemon's pipelines, read from its `/status` endpoint.

The daemon is found at `--url`, or at the address its config file names (`--config`). Below `WIDE` columns each
query is a block of lines (as `kubectl describe` prints), its state first; wider, one table row per query; piped,
blocks whole (`opsd.cli.blocks`). Nothing is ever cut: a value too long for the terminal folds. A failed query
shows its error and whether opsd stopped it for good. Exit codes: 0 when no pipeline has failed, `PIPELINE_FAILED`
when one has (a script can page on it), 1 when no daemon answers.
"""

from __future__ import annotations

import argparse
import json
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping
from http import HTTPStatus
from pathlib import Path
from typing import Any

from rich.console import Group
from rich.text import Text

from opsd.cli.blocks import Column, Item, console, view, view_width
from opsd.cli.common import DEFAULT_URL, CliError
from opsd.config.load import load_config
from opsd.config.models import OpsdConfig
from opsd.config.spark import EVERY_INTERFACE, LOOPBACK
from opsd.observe.status import state_word
from opsd.telemetry.redaction import redact
from opsd.telemetry.terminal import Shown

#: The facts of a query, as the table's columns and the blocks' labels.
COLUMNS = (Column("query"), Column("state"), Column("batch", "right"), Column("last batch", "right"),
           Column("backlog", "right"), Column("restarts", "right"), Column("error", in_table=False),
           Column("", in_table=False))
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
    config = load_config(args.config) if args.config else None
    url = (daemon_url(config) if config else args.url).rstrip("/")
    request = urllib.request.Request(url + "/status", headers=_authorization(config))
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            document = json.load(response)
    except urllib.error.HTTPError as e:
        if e.code != HTTPStatus.UNAUTHORIZED:
            raise CliError(f"the opsd daemon at {url} answered {e.code} {e.reason}") from None
        raise CliError(f"the opsd daemon at {url} asks for the token of its http.bearer_token_file: --config "
                       "ITS_CONFIG.yaml sends it") from None
    except (urllib.error.URLError, OSError) as e:
        how = "" if args.config else " (a daemon with another http.port: --config ITS_CONFIG.yaml, or --url)"
        raise CliError(f"no opsd daemon answers at {url}: {getattr(e, 'reason', e)}; is `opsd run` running?"
                       f"{how}") from None
    if args.json:
        print(json.dumps(redact(document), indent=2))
    else:
        out = console()
        out.print(status_view(document, view_width(out)))
    failed = any(query_state(q) == "failed" for q in _queries(document).values())
    return PIPELINE_FAILED if failed else 0


def _authorization(config: OpsdConfig | None) -> dict[str, str]:
    """The `Authorization` header the daemon of `config` asks for (its `http.bearer_token_file`), else none."""
    if config is None or not config.http.bearer_token_file:
        return {}
    try:
        token = Path(config.http.bearer_token_file).read_text(encoding="utf-8").strip()
    except OSError as e:
        raise CliError(f"http.bearer_token_file {config.http.bearer_token_file}: cannot be read "
                       f"({e.strerror or type(e).__name__})") from None
    return {"Authorization": f"Bearer {token}"}


def daemon_url(config: OpsdConfig) -> str:
    """Where a client on this host reaches the daemon that runs `config`."""
    host = config.http.host
    host = LOOPBACK if host in (*EVERY_INTERFACE, "") else f"[{host}]" if ":" in host else host
    return f"http://{host}:{config.http.port}"


def status_view(document: dict, width: int | None = 80, *, now: Callable[[], float] = time.time) -> Group:
    """The `/status` document for people laid out for `width` columns (None: no width, see `opsd.cli.blocks`), then
    the Spark UI's address when it is on; a failed query's error and whether it is final below its row in a table,
    in its block in blocks. Every value is data (a query attached with any name, a daemon's document): shown as text,
    never markup, control characters escaped."""
    shown = Shown()
    queries = sorted(_queries(document).items())
    ui = [Text(""), Text(shown.line(f"Spark UI: {document['spark_ui']}"))] \
        if document.get("spark_ui") else []
    if not queries:
        return Group(Text("no pipelines yet"), *ui)
    facts = [(shown.line(name), _facts(q, now(), shown)) for name, q in queries]
    items = [Item(name, tuple(f.get(c.label) for c in COLUMNS[1:])) for name, f in facts]
    failures = [Text(f"{name}: {f['error']}; {f['']}") for name, f in facts if "error" in f]
    return Group(*view(COLUMNS, items, width, title="opsd pipelines", below=failures), *ui)


def _queries(document: Mapping[str, Any]) -> Mapping[str, Mapping[str, Any]]:
    return document.get("queries", document)


def _facts(query: Mapping[str, Any], now: float, shown: Shown) -> dict[str, str]:
    """One query's facts in words, by label, shown as text; a failure's error under `error` and whether it is final
    under the nameless label (its line continues the error's)."""
    last = query.get("last_progress_at")
    facts = {"state": query_state(query), "batch": _count(query.get("last_batch_id"), "-"),
             "last batch": _age(now - last) if isinstance(last, int | float) else "-",
             "backlog": _count(query.get("backlog_rows"), "unknown"), "restarts": _count(query.get("restarts"), "0")}
    if facts["state"] == "failed":
        final = query.get("permanent_failure")
        facts["error"] = query.get("error") or query.get("exception_class") or "unknown error"
        facts[""] = "opsd restarts it" if not final else "stopped for good" if final == facts["error"] else \
            f"stopped for good: {final}"
    return {label: shown.line(value) for label, value in facts.items()}


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
