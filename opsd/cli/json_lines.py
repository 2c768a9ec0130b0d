"""JSON-lines input of `opsd queue produce`: one JSON object per line, in batches that remember their lines."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from typing import Any

from opsd.cli.common import CliError
from opsd.demo.producer import Batch


def json_line_batches(lines: Iterable[str], source: str, batch_rows: int) -> Iterator[Batch]:
    """Batches of JSON objects, one per non-blank line; `CliError` names the line of bad JSON."""
    rows: list[dict[str, Any]] = []
    first = 0
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        rows.append(_parse_line(line, number, source))
        first = first or number
        if len(rows) == batch_rows:
            yield Batch(rows, first, number)
            rows, first = [], 0
    if rows:
        yield Batch(rows, first, number)


def _parse_line(line: str, number: int, source: str) -> dict[str, Any]:
    try:
        row = json.loads(line)
    except json.JSONDecodeError as e:
        raise CliError(f"{source}: line {number}: invalid JSON: {e.msg} (column {e.colno})") from None
    if not isinstance(row, dict):
        raise CliError(f"{source}: line {number}: expected a JSON object, got {type(row).__name__}")
    return row
