"""What the demo shows: its rows of facts (counters and what opsd knows of the query), the backlog bar, the live
display (redrawn in place on a terminal, plain periodic lines when piped) and the closing summary.

Every fact is one entry of `ROWS`: a label and how to read it from a `Snapshot`. A fact opsd learns later (desync,
lag, OOM risk) is one more entry reading its field of the query's status.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TextIO

from rich.console import Console, Group
from rich.live import Live
from rich.table import Table
from rich.text import Text

from opsd.demo.scenario import QUEUE, RESULT
from opsd.observe.status import QueryStatus
from opsd.telemetry.terminal import Shown


@dataclass(frozen=True)
class Snapshot:
    """What the demo knows at one moment; `query` is the pipeline's status in opsd (None before opsd knows it)."""

    elapsed_seconds: float
    produced: int
    written: int
    query: QueryStatus | None
    url: str | None
    log_file: str
    #: What Spark says the query is doing now ("Processing new data", "Waiting for next trigger").
    activity: str = "-"

    @property
    def batches(self) -> int:
        return batches_done(self.query.last_batch_id if self.query else None)

    @property
    def backlog(self) -> int | None:
        return self.query.backlog_rows if self.query else None


def batches_done(last_batch_id: int | None) -> int:
    """Batches completed so far: batch ids start at 0."""
    return 0 if last_batch_id is None else last_batch_id + 1


def _count(value: int | None) -> str:
    return "unknown" if value is None else f"{value:,}"


def _last_batch(s: Snapshot) -> str:
    last = s.query.last_progress if s.query else None
    if last is None:
        return "none yet"
    took = f" in {last.duration_seconds:.2f} s" if last.duration_seconds is not None else ""
    return f"#{last.batch_id}: {last.num_input_rows:,} rows{took}"


#: The facts shown, in order: (label, how to read it). Adding a fact is adding a line here.
ROWS: tuple[tuple[str, Callable[[Snapshot], str]], ...] = (
    ("rows produced", lambda s: f"{s.produced:,}"),
    ("rows written", lambda s: f"{s.written:,}"),
    ("batches done", lambda s: f"{s.batches:,}"),
    ("last batch", _last_batch),
    ("backlog rows", lambda s: _count(s.backlog)),
    ("query", lambda s: s.query.state if s.query else "starting"),
    ("activity", lambda s: s.activity),
    ("max rows/partition", lambda s: _count(s.query.max_rows_per_partition if s.query else None)),
    ("dyn batch size", lambda s: _count(s.query.dyn_batch_size if s.query else None)),
    ("metrics", lambda s: f"{s.url}/metrics" if s.url else "-"),
    ("logs", lambda s: s.log_file),
)
BAR_WIDTH = 40


def facts(snapshot: Snapshot) -> list[tuple[str, str]]:
    """(label, value) of every row; values are data (Spark's activity text, paths): control characters escaped."""
    shown = Shown()
    return [(label, shown.line(read(snapshot))) for label, read in ROWS]


def backlog_bar(backlog: int | None, scale: int, width: int = BAR_WIDTH) -> str:
    """The backlog as a bar against `scale` (the largest backlog seen): empty at 0 rows, full at the peak; drawn
    with two characters, so it reads the same without colours."""
    filled = 0 if not backlog or scale <= 0 else max(1, round(width * min(backlog, scale) / scale))
    return "█" * filled + "░" * (width - filled)


def frame(snapshot: Snapshot, scale: int) -> Group:
    """The view on a terminal: the facts as a grid, the backlog bar below."""
    grid = Table.grid(padding=(0, 2))
    for label, value in facts(snapshot):
        grid.add_row(label, Text(value))
    bar = Text(f"backlog {backlog_bar(snapshot.backlog, scale)} {_count(snapshot.backlog)} rows")
    return Group(Text(f"opsd demo, {snapshot.elapsed_seconds:.0f} s"), grid, bar)


def line(snapshot: Snapshot) -> str:
    """The view as one plain line, for output that is not a terminal."""
    return f"[{snapshot.elapsed_seconds:6.1f} s] " + " | ".join(f"{label} {value}" for label, value in facts(snapshot))


class Display:
    """Shows snapshots: redrawn in place on a terminal (rich `Live`), one plain line every `every_seconds` (and the
    last one) otherwise. Use as a context manager; `show` may be called as often as wanted."""

    def __init__(self, console: Console, every_seconds: float = 2.0, clock: Callable[[], float] = time.monotonic):
        self.console = console
        self.every_seconds = every_seconds
        self.clock = clock
        self.peak = 0
        self._live = Live(console=console, refresh_per_second=4, auto_refresh=False) if console.is_terminal else None
        self._printed_at: float | None = None
        self._pending: str | None = None

    def __enter__(self) -> Display:
        if self._live is not None:
            self._live.start()
        return self

    def show(self, snapshot: Snapshot) -> None:
        self.peak = max(self.peak, snapshot.backlog or 0)
        if self._live is not None:
            self._live.update(frame(snapshot, self.peak), refresh=True)
            return
        self._pending = line(snapshot)
        now = self.clock()
        if self._printed_at is None or now - self._printed_at >= self.every_seconds:
            self._print_pending(now)

    def __exit__(self, *exc: object) -> None:
        if self._live is not None:
            self._live.stop()
        elif self._pending is not None:
            self._print_pending(self.clock())

    def _print_pending(self, now: float) -> None:
        file: TextIO = self.console.file
        print(self._pending, file=file, flush=True)
        self._pending, self._printed_at = None, now


def next_steps(cluster_uri: str) -> Text:
    """What to try after the demo: its result and queue stay on the embedded cluster, then a pipeline of one's own."""
    shown = Shown()
    where = f"--cluster {cluster_uri}"
    steps = (
        (f"opsd table read {RESULT} {where}", "the rows the pipeline wrote"),
        (f"opsd queue inspect {QUEUE} {where}", "the queue, its partitions and the consumer's offsets"),
        ("opsd run examples/configs/queue_to_table.yaml", "a pipeline of your own (README: Quick start)"),
    )
    width = max(len(command) for command, _ in steps)
    lines = [f"  {shown.line(command).ljust(width)}   # {why}" for command, why in steps]
    return Text("next:\n" + "\n".join(lines))


def summary(snapshot: Snapshot, durations: list[float]) -> Table:
    """The closing table; its counts are the last snapshot's, so they agree with the view's last frame."""
    table = Table(title="opsd demo summary")
    table.add_column("what")
    table.add_column("value", justify="right")
    table.add_row("rows in (produced)", f"{snapshot.produced:,}")
    table.add_row("rows out (result table)", f"{snapshot.written:,}")
    table.add_row("elapsed seconds", f"{snapshot.elapsed_seconds:.1f}")
    table.add_row("batches", f"{snapshot.batches:,}")
    if durations:
        table.add_row("batches that read rows", f"{len(durations):,}")
        table.add_row("batch duration p50 / max (s)", f"{statistics.median(durations):.2f} / {max(durations):.2f}")
    ok = snapshot.written >= snapshot.produced
    table.add_row("result", "OK: every row arrived" if ok else "MISSING ROWS")
    return table
