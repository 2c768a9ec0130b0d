"""`opsd run CONFIG.yaml`, `opsd demo` and `opsd status`: the daemon's commands."""

from __future__ import annotations

import argparse
import json
import urllib.error
import urllib.request

from rich.console import Console
from rich.table import Table

from opsd.cli_common import CliError
from opsd.config import ConfigError


def add_parser(subparsers: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    run = subparsers.add_parser("run", help="run the pipelines of a config file until SIGTERM")
    run.add_argument("config", help="opsd YAML config (cluster, spark, http, checks, pipelines)")
    run.set_defaults(handler=run_command)

    demo = subparsers.add_parser("demo", parents=[common], help="the end-to-end demo on an embedded cluster")
    demo.add_argument("--rate", type=float, default=2000, help="rows per second produced (default 2000)")
    demo.add_argument("--duration", type=float, default=30, help="seconds to produce; 0 = until Ctrl-C")
    demo.add_argument("--partitions", type=int, default=2, help="queue partitions (default 2)")
    demo.add_argument("--port", type=int, default=9108, help="metrics port (0 = any free port)")
    demo.add_argument("--root", default=".opsd/demo", help="embedded cluster root, wiped first")
    demo.set_defaults(handler=demo_command)

    status = subparsers.add_parser("status", help="print a running daemon's pipelines")
    status.add_argument("--url", default="http://127.0.0.1:9108", help="the daemon's HTTP address")
    status.add_argument("--json", action="store_true", help="print the raw /status document")
    status.set_defaults(handler=status_command)


def run_command(args: argparse.Namespace) -> int:
    from opsd.daemon import run
    from opsd.logs import configure_logging

    configure_logging()
    try:
        return run(args.config)
    except ConfigError as e:
        raise CliError(str(e)) from None


def demo_command(args: argparse.Namespace) -> int:
    from opsd.demo import DemoSettings, run_demo
    from opsd.logs import configure_logging

    configure_logging("WARNING")  # the live view is the demo's output; logs only for problems

    if args.rate <= 0 or args.partitions < 1 or args.duration < 0:
        raise CliError("--rate must be > 0, --partitions >= 1 and --duration >= 0")
    return run_demo(DemoSettings(rate=args.rate, duration=args.duration, partitions=args.partitions,
                                 port=args.port, root=args.root))


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
    for column in ("query", "active", "last batch", "backlog rows", "restarts", "stalled", "exception"):
        table.add_column(column)
    queries = document.get("queries", document)
    for name, q in sorted(queries.items()):
        table.add_row(name, str(q.get("active")), str(q.get("last_batch_id")), str(q.get("backlog_rows")),
                      str(q.get("restarts")), str(q.get("stalled")), (q.get("exception_class") or ""))
    return table
