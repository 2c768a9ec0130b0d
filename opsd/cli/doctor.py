"""`opsd doctor`: what is wrong with my streaming job and what do I do — for a running daemon (`--url`, the
default), a config file (`--config`) or offline for one checkpoint with its queue and consumer (`--checkpoint`).

A table for people (per query: state, desync per partition, backlog, lag, time to drain, tuning values, the
auto-tuner's recommendation, last failure; then each finding with its advice), `--json` for scripts. Exit 0
healthy, 1 something needs action, 2 the doctor itself failed.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import urllib.error
import urllib.request
from typing import Any

from rich.console import Console
from rich.table import Table

from opsd.checks.positions.collect import QueryTarget
from opsd.cli.common import DEFAULT_URL
from opsd.config.load import load_config
from opsd.doctor.advice import Naming
from opsd.doctor.diagnose import diagnose
from opsd.doctor.gather import from_config, from_status, from_targets
from opsd.doctor.report import Report
from opsd.telemetry.redaction import redact
from opsd.telemetry.terminal import Shown
from streaming_core.cluster import connect

HEALTHY, NEEDS_ACTION, DOCTOR_FAILED = 0, 1, 2


def add_parser(subparsers: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    doctor = subparsers.add_parser("doctor", parents=[common],
                                   help="diagnose streaming queries and say what to do (exit 0 healthy, 1 action)")
    where = doctor.add_mutually_exclusive_group()
    where.add_argument("--url", help=f"a running daemon (default {DEFAULT_URL})")
    where.add_argument("--config", help="an opsd config file: its pipelines and watched queries, read offline")
    where.add_argument("--checkpoint", metavar="LOCATION", help="one checkpoint, read offline")
    doctor.add_argument("--queue", help="with --checkpoint: the queue (default: every yt source of the checkpoint)")
    doctor.add_argument("--consumer", help="with --checkpoint: the consumer (default: the offsets' consumer_path)")
    doctor.add_argument("--json", action="store_true", help="print JSON for scripts")
    doctor.set_defaults(handler=doctor_command)


def doctor_command(args: argparse.Namespace) -> int:
    try:
        report = examine(args)
    except Exception as e:  # the doctor failing is an answer too: exit 2, never a traceback
        print(f"opsd doctor: failed: {type(e).__name__}: {Shown().line(str(e), one_line=False)}", file=sys.stderr)
        return DOCTOR_FAILED
    if args.json:
        print(json.dumps(redact(report.to_json()), indent=2))
    else:
        console, shown = Console(), Shown()
        console.print(queries_table(report, shown))
        console.print(findings_table(report, shown))
    return HEALTHY if report.healthy else NEEDS_ACTION


def examine(args: argparse.Namespace) -> Report:
    if args.config:
        config = load_config(args.config)
        with connect(args.cluster or config.cluster) as cluster:
            queries = from_config(cluster, config, time.time())
        return diagnose(args.config, queries, Naming.of_config(args.config, args.cluster or config.cluster))
    if args.checkpoint:
        target = QueryTarget(args.checkpoint, args.checkpoint, args.queue, args.consumer)
        with connect(args.cluster) as cluster:
            queries = from_targets(cluster, [target], time.time())
        flags = "".join(f" --{k} {v}" for k, v in (("queue", args.queue), ("consumer", args.consumer),
                                                    ("cluster", args.cluster)) if v)
        return diagnose(args.checkpoint, queries, Naming.of_checkpoint(flags, args.cluster))
    url = (args.url or DEFAULT_URL).rstrip("/")
    try:
        with urllib.request.urlopen(url + "/status", timeout=5) as response:
            document = json.load(response)
    except (urllib.error.URLError, OSError) as e:
        raise ConnectionError(f"no opsd daemon answers at {url}: {e}") from None
    return diagnose(url, from_status(document), Naming.of_config("CONFIG"))


def queries_table(report: Report, shown: Shown) -> Table:
    """Per query its facts; every cell is data (names, paths, Spark's texts) shown as text, never as markup."""
    table = Table(title=shown(f"opsd doctor: {report.source}"))
    for column in ("query", "state", "desync", "backlog rows", "max lag", "time to drain", "max_rows / dynBatch",
                   "auto-tuner", "last failure"):
        table.add_column(column)
    for q in report.queries:
        f = q.facts
        lag = f.get("lag") or {}
        cells = [q.query, _state(f), _desync(f, shown), _text(lag.get("backlog_rows")), _max_lag(lag),
                 _seconds(lag.get("time_to_drain_seconds")),
                 f"{_text(f.get('max_rows_per_partition'))} / {_text(f.get('dyn_batch_size'))}",
                 _autotune(f, shown), f.get("exception_class") or ""]
        table.add_row(*(shown(c) for c in cells))
    return table


def findings_table(report: Report, shown: Shown) -> Table:
    table = Table(title="healthy" if report.healthy else "needs action")
    for column in ("query", "severity", "finding", "advice"):
        table.add_column(column)
    for finding in report.findings:
        table.add_row(*(shown(c) for c in (finding.query, finding.severity.value, finding.what, finding.advice)))
    return table


def _state(facts: dict[str, Any]) -> str:
    if "active" not in facts:
        return "offline"
    return "active" if facts["active"] else ("failed" if facts.get("exception_class") else "stopped")


def _desync(facts: dict[str, Any], shown: Shown) -> str:
    """A line per queue, `(vital)` after it when its consumer is (each line's data escaped, newlines within it
    included)."""
    parts = []
    for queue, d in (facts.get("desync") or {}).items():
        states = ", ".join(f"{p}:{x['state']}" for p, x in (d.get("partitions") or {}).items())
        vital = " (vital)" if d.get("vital") else ""
        parts.append(shown.line(f"{queue}{vital} {states or d.get('problem') or ''}"))
    return "\n".join(parts)


def _autotune(facts: dict[str, Any], shown: Shown) -> str:
    """Per knob: `knob: current -> recommended (reason, mode)`, or `= current` while holding."""
    lines = []
    for knob, v in (facts.get("autotune") or {}).items():
        value = f"= {_text(v['current'])}" if v["direction"] == "hold" else \
            f"{_text(v['current'])} -> {_text(v['recommended'])}"
        lines.append(shown.line(f"{knob}: {value} ({v['reason']}, {v['mode']})"))
    return "\n".join(lines) or "-"


def _max_lag(lag: dict[str, Any]) -> str:
    known = [p["lag_seconds"] for parts in (lag.get("queues") or {}).values() for p in parts.values()
             if p["lag_seconds"] is not None]
    return _seconds(max(known)) if known else "-"


def _seconds(value: Any) -> str:
    return "-" if value is None else (value if isinstance(value, str) else f"{float(value):.1f}s")


def _text(value: Any) -> str:
    return "-" if value is None else str(value)
