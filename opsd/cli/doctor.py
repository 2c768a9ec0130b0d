"""`opsd doctor`: what is wrong with my streaming job and what do I do — for a running daemon (`--url`, the
default), a config file (`--config`) or offline for one checkpoint with its queue and consumer (`--checkpoint`).

For people, per query: state, desync per queue, backlog, lag, time to drain, tuning values, the auto-tuner's
recommendation, last failure; then each finding with its advice, or `healthy: nothing to do` — a table on a wide
terminal, one block per query and per finding on a narrow one or in a pipe (`opsd.cli.blocks`), states and reasons in
words. `--json` for scripts, with the machine names. Exit 0 healthy, 1 something needs action, 2 the doctor itself
failed.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import urllib.error
import urllib.request
from shlex import quote
from typing import Any

from rich.console import RenderableType
from rich.text import Text

from opsd.cli.blocks import Column, Item, console, view, view_width
from opsd.cli.common import DEFAULT_URL
from opsd.cli.status import query_state
from opsd.collect.positions import QueryTarget
from opsd.config.load import load_config
from opsd.doctor.advice import Naming
from opsd.doctor.diagnose import diagnose
from opsd.doctor.gather import from_config, from_status, from_targets
from opsd.doctor.report import Report
from opsd.results.autotune import TuneReason
from opsd.results.desync import DesyncState
from opsd.results.values import in_words
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
        out = console()
        for part in report_view(report, view_width(out), Shown()):
            out.print(part)
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
        flags = "".join(f" --{k} {quote(v)}" for k, v in (("queue", args.queue), ("consumer", args.consumer),
                                                    ("cluster", args.cluster)) if v)
        return diagnose(args.checkpoint, queries, Naming.of_checkpoint(flags, args.cluster))
    url = (args.url or DEFAULT_URL).rstrip("/")
    try:
        with urllib.request.urlopen(url + "/status", timeout=5) as response:
            document = json.load(response)
    except (urllib.error.URLError, OSError) as e:
        raise ConnectionError(f"no opsd daemon answers at {url}: {e}") from None
    return diagnose(url, from_status(document), Naming.of_config("CONFIG"))


#: Per query its facts, the state first: the table's columns, the blocks' labels.
COLUMNS = (Column("query"), Column("state"), Column("desync"), Column("backlog rows", "right"),
           Column("max lag", "right"), Column("time to drain", "right"), Column("max_rows / dynBatch", "right"),
           Column("auto-tuner"), Column("last failure"))
#: Per finding: what, and what to do.
FINDING_COLUMNS = (Column("query"), Column("severity"), Column("finding"), Column("advice"))


def report_view(report: Report, width: int | None, shown: Shown) -> list[RenderableType]:
    """The report for people `width` columns wide (None: no width; see `opsd.cli.blocks`): the queries' facts, then
    the findings with their advice, or one line saying there is nothing to do. Every value is data (names, paths,
    Spark's texts): shown as text, never markup."""
    queries = [Item(shown.line(q.query), tuple(_query_facts(q.facts, shown))) for q in report.queries]
    parts = view(COLUMNS, queries, width, title=shown.line(f"opsd doctor: {report.source}"))
    if not report.findings:
        return [*parts, Text(""), Text("healthy: nothing to do")]
    findings = [Item(shown.line(f.query), (f.severity.value, shown.line(f.what), shown.line(f.advice)))
                for f in report.findings]
    title = "healthy: only notes" if report.healthy else "needs action"
    return [*parts, Text(""), *view(FINDING_COLUMNS, findings, width, title=title)]


def _query_facts(facts: dict[str, Any], shown: Shown) -> list[str]:
    lag = facts.get("lag") or {}
    return [_state(facts), _desync(facts, shown), _text(lag.get("backlog_rows")), _max_lag(lag),
            _seconds(lag.get("time_to_drain_seconds")),
            f"{_text(facts.get('max_rows_per_partition'))} / {_text(facts.get('dyn_batch_size'))}",
            _autotune(facts, shown), shown.line(facts.get("exception_class") or "-")]


def _state(facts: dict[str, Any]) -> str:
    """`opsd status`'s word for a daemon's query; `offline` for facts read from a checkpoint or a config."""
    return query_state(facts) if "active" in facts else "offline"


def _desync(facts: dict[str, Any], shown: Shown) -> str:
    """Per queue a line (`(vital)` after it when its consumer is), then a line per state: the partitions in it (data
    escaped, newlines within it included)."""
    lines = []
    for queue, d in (facts.get("desync") or {}).items():
        if d.get("problem") or not d.get("partitions"):
            lines.append(shown.line(f"{queue}: {d.get('problem') or 'nothing to compare yet (no committed batch)'}"))
            continue
        by_state: dict[str, list[str]] = {}
        for partition, p in d["partitions"].items():
            by_state.setdefault(p["state"], []).append(str(partition))
        vital = " (vital)" if d.get("vital") else ""
        lines += [shown.line(queue + vital), *(f"  {_partitions(parts)}: {in_words(DesyncState, state)}"
                                       for state, parts in by_state.items())]
    return "\n".join(lines) or "-"


def _partitions(parts: list[str]) -> str:
    return ("partition " if len(parts) == 1 else "partitions ") + ", ".join(parts)


def _autotune(facts: dict[str, Any], shown: Shown) -> str:
    """Per knob: `knob: current -> recommended (why, mode)`, or `= current` while holding."""
    lines = []
    for knob, v in (facts.get("autotune") or {}).items():
        value = f"= {_text(v['current'])}" if v["direction"] == "hold" else \
            f"{_text(v['current'])} -> {_text(v['recommended'])}"
        lines.append(shown.line(f"{knob}: {value} ({in_words(TuneReason, v['reason'])}; {v['mode']})"))
    return "\n".join(lines) or "-"


def _max_lag(lag: dict[str, Any]) -> str:
    known = [p["lag_seconds"] for parts in (lag.get("queues") or {}).values() for p in parts.values()
             if p["lag_seconds"] is not None]
    return _seconds(max(known)) if known else "-"


def _seconds(value: Any) -> str:
    return "-" if value is None else (value if isinstance(value, str) else f"{float(value):.1f}s")


def _text(value: Any) -> str:
    return "-" if value is None else str(value)
