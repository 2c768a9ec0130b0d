"""What the demo shows: the live terminal view (counters, the backlog as a bar) and the closing summary."""

from __future__ import annotations

import statistics

from rich.console import Group
from rich.progress import BarColumn, Progress, TextColumn
from rich.table import Table

from opsd.demo.scenario import PIPELINE


def batches_done(last_batch_id: int | None) -> int:
    """Batches completed so far: batch ids start at 0."""
    return 0 if last_batch_id is None else last_batch_id + 1


def view(produced: int, written: int, status: dict, url: str | None) -> Group:
    """The live terminal view: counters and the backlog as a bar."""
    table = Table.grid(padding=(0, 2))
    q = status.get(PIPELINE, {})
    for label, value in (("metrics", f"{url}/metrics" if url else "-"), ("rows produced", produced),
                         ("rows written", written), ("batches", batches_done(q.get("last_batch_id"))),
                         ("query active", q.get("active"))):
        table.add_row(label, str(value))
    backlog = Progress(TextColumn("backlog"), BarColumn(), TextColumn("{task.completed:,.0f} rows"))
    backlog.add_task("backlog", total=max(produced, 1), completed=max(0, produced - written))
    return Group(table, backlog)


def summary(rows_in: int, rows_out: int, durations: list[float], elapsed: float) -> Table:
    table = Table(title="opsd demo summary")
    table.add_column("what")
    table.add_column("value", justify="right")
    table.add_row("rows in (produced)", f"{rows_in:,}")
    table.add_row("rows out (result table)", f"{rows_out:,}")
    table.add_row("elapsed seconds", f"{elapsed:.1f}")
    if durations:
        table.add_row("batches", str(len(durations)))
        table.add_row("batch duration p50 / max (s)", f"{statistics.median(durations):.2f} / {max(durations):.2f}")
    table.add_row("result", "OK: every row arrived" if rows_out >= rows_in else "MISSING ROWS")
    return table
