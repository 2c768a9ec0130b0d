"""JSON-lines input of `opsd queue produce`: one JSON object per line, in batches that remember their lines.

Each row is converted by the table's `json_values.row_decoder`, so errors name the line and the column."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

from opsd.cli.common import CliError
from opsd.demo.producer import Batch


def json_line_batches(lines: Iterable[str], source: str, batch_rows: int,
                      convert: Callable[[Mapping[str, Any]], dict[str, Any]]) -> Iterator[Batch]:
    """Batches of converted JSON objects, one per non-blank line; `CliError` names the line of bad input."""
    rows: list[dict[str, Any]] = []
    numbers: list[int] = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        rows.append(_convert(convert, _parse_line(line, number, source), number, source))
        numbers.append(number)
        if len(rows) == batch_rows:
            yield Batch(rows, numbers[0], number, tuple(numbers))
            rows, numbers = [], []
    if rows:
        yield Batch(rows, numbers[0], numbers[-1], tuple(numbers))


def _convert(convert: Callable[[Mapping[str, Any]], dict[str, Any]], row: dict[str, Any], number: int,
             source: str) -> dict[str, Any]:
    try:
        return convert(row)
    except ValueError as e:
        raise CliError(f"{source}: line {number}: {e}") from None


def _parse_line(line: str, number: int, source: str) -> dict[str, Any]:
    try:
        row = json.loads(line)
    except json.JSONDecodeError as e:
        raise CliError(f"{source}: line {number}: invalid JSON: {e.msg} (column {e.colno})") from None
    if not isinstance(row, dict):
        raise CliError(f"{source}: line {number}: expected a JSON object, got {type(row).__name__}")
    return row
