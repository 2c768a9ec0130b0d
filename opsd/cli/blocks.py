"""How `opsd status`, `opsd doctor` and `opsd desync show` lay out their facts for people: one width rule, one block,
one table.

A view is a list of items (a query, a partition), each a name and its facts in order, the state first. At `WIDE`
columns or more it is a table, a row per item; narrower, one block per item (as `kubectl describe` prints): the name,
then a line per fact, `label  value`, a long value wrapping under its value column. A table only where it fits:
no word of a cell is split (a long path, a long name: blocks instead). Nothing is ever cut with `…`: table cells
wrap, block values wrap and fold. Output that is not a terminal (a pipe, a file) with no `COLUMNS` to size it is
always blocks, never wrapped: rich would otherwise assume 80 columns and cut there.

Texts leave their overflow to the console: rich folds a line too long for a terminal, and a pipe's console
(`soft_wrap`) keeps it whole (a Text that asked to fold would be cut there). Every string handed in is already data
made safe (`opsd.telemetry.terminal.Shown`); it is rendered as text, never parsed as markup. A value may hold
several lines (a line per queue, per knob).
"""

from __future__ import annotations

import io
import os
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import IO, Literal

from rich import box
from rich.console import Console, ConsoleOptions, RenderableType, RenderResult
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text

#: Terminals at least this wide get a table; narrower ones one block per item.
WIDE = 120
#: A width no table reaches: the one a table's narrowest layout is measured at.
UNBOUNDED = 1_000_000
#: Block values never wrap narrower than this: on a very narrow terminal the console folds the whole line instead.
NARROWEST_VALUE = 20


@dataclass(frozen=True)
class Column:
    """A fact's label (a table's header); numbers are right-justified in a table. A fact not `in_table` is in the
    blocks only (a table says it below itself, e.g. a failure's whole error)."""

    label: str
    justify: Literal["left", "right"] = "left"
    in_table: bool = True


@dataclass(frozen=True)
class Item:
    """One block or table row: its name and a value per column (`None`: the fact is left out of the block)."""

    name: str
    values: tuple[str | None, ...]


def console(file: IO[str] | None = None) -> Console:
    """The console to print a view to (stdout unless told), and `view_width` its width: a terminal's, `$COLUMNS`
    when set, else (a pipe, a file) none — printed whole, never wrapped nor cut."""
    file = file or sys.stdout
    if file.isatty() or os.environ.get("COLUMNS", "").isdigit():
        return Console(file=file)
    return Console(file=file, soft_wrap=True)


def view_width(out: Console) -> int | None:
    """The width views are laid out for on `out`; None when it has none (see `console`)."""
    return None if out.soft_wrap else out.width


def view(columns: Sequence[Column], items: Sequence[Item], width: int | None, *, title: str | None = None,
         below: Sequence[RenderableType] = ()) -> list[RenderableType]:
    """The items as a table, then what is `below` it, where the table fits: `width` is at least `WIDE` and no word
    of a cell must be split; else one block each. `columns[0]` is the items' names' column."""
    if width is not None and width >= WIDE:
        rows = table(columns, items, title=title)
        # Measured unbounded: rich clamps a measure to the width it is given, the longest words would pass.
        measuring = Console(width=UNBOUNDED, file=io.StringIO())
        if Measurement.get(measuring, measuring.options, rows).minimum <= width:
            return [rows, *below]
    label_width = max(len(c.label) for c in columns[1:]) + 2
    parts: list[RenderableType] = [Text(title)] if title else []
    for item in items:
        parts += [Text(""), Block(item.name, [(c.label, v) for c, v in zip(columns[1:], item.values, strict=True)],
                                  label_width)]
    return parts[1:] if not title else parts


def table(columns: Sequence[Column], items: Iterable[Item], *, title: str | None = None) -> Table:
    """A row per item; every cell folds (or wraps at a space) where its column is too narrow, never cut with `…`."""
    out = Table(title=Text(title) if title else None, title_justify="left", box=box.SIMPLE_HEAD, show_edge=False)
    shown = [i for i, column in enumerate(columns) if column.in_table]
    for i in shown:
        out.add_column(columns[i].label, justify=columns[i].justify, overflow="fold",
                       min_width=_longest_word(columns[i].label))
    for item in items:
        cells = (item.name, *item.values)
        out.add_row(*(Text(cells[i] or "") for i in shown))
    return out


def _longest_word(text: str) -> int:
    return max(len(word) for word in text.split())


class Block:
    """One item: its name, then `  label  value` per fact (a value of several lines continues under its first; a
    line too long for the width wraps under its own start)."""

    def __init__(self, name: str, facts: Sequence[tuple[str, str | None]], label_width: int) -> None:
        self.name, self.facts, self.label_width = name, facts, label_width

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        indent = 2 + self.label_width
        width = None if options.no_wrap else max(NARROWEST_VALUE, options.max_width - indent)
        name = Text(self.name)
        for piece in name.wrap(console, options.max_width, overflow="fold") if width else [name]:
            piece.rstrip()
            yield piece
        for label, value in self.facts:
            if value is None:
                continue
            head = "  " + label.ljust(self.label_width)
            for line in value.splitlines() or [""]:
                # A line indented within the value (a queue's partitions under it) wraps under its own text.
                lead = " " * (len(line) - len(line.lstrip(" ")))
                text = Text(line.lstrip(" "))
                for piece in text.wrap(console, width - len(lead), overflow="fold") if width else [text]:
                    piece.rstrip()
                    yield Text.assemble(head, lead, piece)
                    head = " " * indent
