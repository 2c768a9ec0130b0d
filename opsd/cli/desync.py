"""`opsd desync show | heal`: a query's checkpoint against its consumer and queue, and the heal of a lagging consumer.

A query is named by its pipeline or `watch:` name in a config file (`QUERY --config FILE`), or given directly by
its checkpoint (`--checkpoint LOCATION`, with `--queue` and `--consumer` where the offsets do not name them, as
SPYT's do not). A heal advances the consumer to the newest committed batch's end with the source's own
compare-and-set advance, and is refused while a batch runs or when the facts are unsafe (see
`opsd.checks.desync.decide`). A heal made or refused as unsafe goes into the query's decision history as the daemon's
do (`opsd history`): the config's table for QUERY, else the one next to the consumer's tuning document, under the
query's name (with `--checkpoint`: its location).
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import replace

from rich.console import RenderableType
from rich.text import Text

from opsd.checks.desync.apply import apply
from opsd.checks.desync.decide import HealDecision, decide
from opsd.checks.desync.evaluate import evaluate
from opsd.cli.blocks import Column, Item, console, view, view_width
from opsd.cli.common import CliError, resolve_target
from opsd.collect.positions import collect_target
from opsd.config.load import load_config
from opsd.config.models import ChecksSettings, unnamed_for_heal
from opsd.observe.status import jsonable
from opsd.results.desync import HealOutcome, QueueDesync
from opsd.stores.history.apply import HistoryLog
from opsd.stores.history.decide import heal_entries
from opsd.stores.history.table import history_path
from opsd.telemetry.redaction import redact
from opsd.telemetry.terminal import Shown
from streaming_core.checkpoint import newest_batch
from streaming_core.cluster import connect, default_uri
from streaming_core.tuning import default_tuning_path

#: Outcomes of `opsd desync heal` that exit 0.
FINE = (HealOutcome.HEALED, HealOutcome.NOTHING_TO_HEAL)


def add_parser(subparsers: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    desync = subparsers.add_parser("desync", help="compare a query's checkpoint with its consumer; heal the consumer")
    commands = desync.add_subparsers(dest="desync_command", required=True, metavar="COMMAND")
    target = argparse.ArgumentParser(add_help=False)
    target.add_argument("query", nargs="?", help="a pipeline or watch name of --config")
    target.add_argument("--config", help="the opsd config file that names QUERY")
    target.add_argument("--checkpoint", metavar="LOCATION", help="a checkpoint location instead of QUERY")
    target.add_argument("--queue", help="with --checkpoint: the queue (default: every yt source of the checkpoint)")
    target.add_argument("--consumer", help="with --checkpoint: the consumer (default: the offsets' consumer_path)")

    show = commands.add_parser("show", parents=[common, target], help="per partition: state, checkpoint, consumer")
    show.add_argument("--json", action="store_true", help="print JSON for scripts")
    show.set_defaults(handler=show_desync)

    heal = commands.add_parser("heal", parents=[common, target],
                               help="advance a lagging consumer to the committed batch's end")
    heal.add_argument("--dry-run", action="store_true", help="say what would move, change nothing")
    heal.add_argument("--stopped", action="store_true",
                      help="the query is stopped: heal even though rows are waiting past the checkpoint")
    heal.set_defaults(handler=heal_desync)


def show_desync(args: argparse.Namespace) -> int:
    uri, target = resolve_target(args)
    with connect(uri or default_uri()) as cluster:
        desyncs = [evaluate(f) for f in collect_target(cluster, target)]
    if args.json:
        print(json.dumps(redact(jsonable({d.facts.queue: d for d in desyncs})), indent=2))
    else:
        out = console()
        for part in desync_view(desyncs, view_width(out), Shown()):
            out.print(part)
    return 0


def heal_desync(args: argparse.Namespace) -> int:
    uri, target = resolve_target(args)
    missing = unnamed_for_heal(target)
    if missing:
        named = " and ".join(f"--{key}" if args.checkpoint else f"the watch entry's {key} (watch: {key} in "
                             f"{args.config})" for key in missing)
        raise CliError(f"{target.query}: a heal moves only the consumer of the queue you name: give {named}; what a "
                       "checkpoint's offsets name is evidence, never a target")
    code, shown = 0, Shown()
    with connect(uri or default_uri()) as cluster:
        for facts in collect_target(cluster, target, stopped=args.stopped):
            decision = decide(evaluate(facts))
            if args.dry_run:
                moves = {p: (next(x.consumer_offset for x in facts.partitions if x.partition == p), new)
                         for p, new in decision.target.items()}
                outcome = decision.outcome
            else:
                result = apply(cluster, decision, lambda: newest_batch(target.checkpoint, cluster.uri))
                moves, outcome = result.moves, result.outcome
                history(args, target.query, facts.consumer).record(
                    cluster, heal_entries(evaluate(facts), outcome, moves, time.time()))
            print(shown.line(heal_line(replace(decision, outcome=outcome), moves, dry_run=args.dry_run,
                                       problem=facts.problem)))
            code = code or (0 if outcome in FINE else 1)
    return code


def history(args: argparse.Namespace, query: str, consumer: str) -> HistoryLog:
    """The decision history a heal by hand goes into (see the module docstring); never fatal to the heal."""
    checks = load_config(args.config).checks if args.config else ChecksSettings()
    path = history_path(checks.history_path, default_tuning_path(consumer or None))
    return HistoryLog({query: path} if path else {}, None, checks.history_rows_per_query)


def heal_line(decision: HealDecision, moves: dict[int, tuple[int, int]], *, dry_run: bool,
              problem: str | None) -> str:
    """One line per queue: the moves made (or that would be), else the outcome and the problem behind it."""
    head = f"{decision.query}: {decision.queue or '?'} via {decision.consumer or '?'}: "
    if not moves:
        return head + decision.outcome.words + (f": {problem}" if problem else "")
    listed = ", ".join(f"partition {p} {old} -> {new}" for p, (old, new) in sorted(moves.items()))
    verb = "would move" if dry_run else "moved"
    return f"{head}{verb} {listed} (end of committed batch {decision.committed_batch})"


#: Per queue and partition, the state first: the table's columns, the blocks' labels. The item's name is the query
#: and its queue (a block's first line); a problem (nothing could be judged) stands in for the partitions.
COLUMNS = (Column("query / queue"), Column("state"), Column("partition", "right"), Column("checkpoint next", "right"),
           Column("consumer", "right"), Column("difference", "right"), Column("rows", "right"),
           Column("trimmed", "right"), Column("problem"))


def desync_view(desyncs: list[QueueDesync], width: int | None, shown: Shown) -> list[RenderableType]:
    """Per queue and partition: state in words, the checkpoint's next row, the consumer, their difference, the queue's
    counters (a partition added to the queue after the checkpoint is marked `added`: the query starts it at the
    consumer); a table or blocks (`opsd.cli.blocks`). Every value is shown as text (paths and problems come from
    checkpoints and the cluster: never markup)."""
    items = []
    for d in desyncs:
        f = d.facts
        name = shown.line(f"{f.query} {f.queue or ''}".strip())
        if f.problem:
            items.append(Item(name, ("unknown", None, None, None, None, None, None, shown.line(f.problem))))
        for p in d.partitions:
            partition = f"{p.facts.partition} added" if p.facts.added else str(p.facts.partition)
            counts = (p.facts.checkpoint_next, p.facts.consumer_offset, p.difference_rows, p.facts.row_count,
                      p.facts.trimmed_row_count)
            items.append(Item(name, (p.state.words, partition, *(str(n) for n in counts), None)))
    if not items:
        return [Text("no queue to compare")]
    return view(COLUMNS, items, width, title="offset desync")
