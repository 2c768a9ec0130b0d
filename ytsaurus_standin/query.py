"""The subset of the YT query language the stand-in answers: what `YtsaurusCluster` sends to `select_rows`.

`<columns> FROM [<path>] [WHERE <condition> [AND <condition>]...]`, where columns are `*` or `[name]`s separated
by commas, and a condition is `[name] = <literal>`, `[name] BETWEEN <literal> AND <literal>` (inclusive) or
`[name] IN (<literal>, ...)`, with integer or double-quoted string literals (backslash escapes). Anything else is
refused with an error that says so: the stand-in is a test double of the proxy, not a query engine.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

_TOKEN = re.compile(r"""\s*(?:(?P<column>\[[^\]]+\])|(?P<string>"(?:[^"\\]|\\.)*")|(?P<int>-?\d+)|(?P<word>[A-Za-z_]+)
                        |(?P<punct>[=,*()]))""", re.VERBOSE)


class QueryError(ValueError):
    """A query outside the subset, or malformed."""


@dataclass(frozen=True)
class Condition:
    """`low <= column <= high`, and with `among` the column's value is one of those too."""

    column: str
    low: Any
    high: Any
    among: tuple[Any, ...] | None = None


@dataclass(frozen=True)
class Query:
    """A parsed query: the columns (None = `*`), the table's path and the conjunction of conditions."""

    columns: tuple[str, ...] | None
    path: str
    conditions: tuple[Condition, ...]

    def equal(self, column: str) -> Any:
        """The value an `=` condition pins `column` to, or None."""
        return next((c.low for c in self.conditions if c.column == column and c.low == c.high and c.among is None),
                    None)

    def among(self, column: str) -> tuple[Any, ...] | None:
        """The values an `IN` condition allows `column`, or None."""
        return next((c.among for c in self.conditions if c.column == column and c.among is not None), None)

    def bounds(self, column: str) -> tuple[Any, Any] | None:
        return next(((c.low, c.high) for c in self.conditions if c.column == column), None)


def parse(text: str) -> Query:
    tokens = _tokens(text)
    columns: list[str] | None = []
    if tokens and tokens[0] == ("punct", "*"):
        columns = None
        tokens.pop(0)
    else:
        while True:
            columns.append(_expect(tokens, "column", text))
            if not tokens or tokens[0] != ("punct", ","):
                break
            tokens.pop(0)
    _keyword(tokens, "FROM", text)
    path = _expect(tokens, "column", text)
    conditions: list[Condition] = []
    if tokens:
        _keyword(tokens, "WHERE", text)
        while True:
            conditions.append(_condition(tokens, text))
            if not tokens:
                break
            _keyword(tokens, "AND", text)
    return Query(None if columns is None else tuple(columns), path, tuple(conditions))


def _tokens(text: str) -> list[tuple[str, Any]]:
    tokens, pos = [], 0
    while pos < len(text.rstrip()):
        match = _TOKEN.match(text, pos)
        if not match:
            raise QueryError(f"query {text!r}: unexpected text at {pos}: {text[pos:pos + 20]!r}")
        kind = match.lastgroup
        raw = match.group(kind)
        value: Any = raw
        if kind == "column":
            value = raw[1:-1]
        elif kind == "string":
            value = re.sub(r"\\(.)", r"\1", raw[1:-1])
        elif kind == "int":
            value = int(raw)
        tokens.append((kind, value))
        pos = match.end()
    return tokens


def _expect(tokens: list[tuple[str, Any]], kind: str, text: str) -> Any:
    if not tokens or tokens[0][0] != kind:
        raise QueryError(f"query {text!r}: expected a {kind} at {tokens[0][1] if tokens else 'the end'!r}")
    return tokens.pop(0)[1]


def _keyword(tokens: list[tuple[str, Any]], word: str, text: str) -> None:
    if not tokens or tokens[0][0] != "word" or tokens[0][1].upper() != word:
        raise QueryError(f"query {text!r}: expected {word}; the stand-in answers only "
                         f"`cols FROM [path] WHERE [c] = v AND [c] BETWEEN a AND b AND [c] IN (v, ...)`")
    tokens.pop(0)


def _after(tokens: list[tuple[str, Any]], punct: str, text: str) -> list[tuple[str, Any]]:
    """The tokens after the punctuation `punct`, which must come next."""
    if not tokens or tokens[0] != ("punct", punct):
        raise QueryError(f"query {text!r}: expected {punct!r} at {tokens[0][1] if tokens else 'the end'!r}")
    tokens.pop(0)
    return tokens


def _literal(tokens: list[tuple[str, Any]], text: str) -> Any:
    if not tokens or tokens[0][0] not in ("int", "string"):
        raise QueryError(f"query {text!r}: expected an integer or string literal")
    return tokens.pop(0)[1]


def _condition(tokens: list[tuple[str, Any]], text: str) -> Condition:
    column = _expect(tokens, "column", text)
    if tokens and tokens[0] == ("punct", "="):
        tokens.pop(0)
        value = _literal(tokens, text)
        return Condition(column, value, value)
    if tokens and tokens[0][0] == "word" and tokens[0][1].upper() == "IN":
        tokens.pop(0)
        values = [_literal(_after(tokens, "(", text), text)]
        while tokens and tokens[0] == ("punct", ","):
            tokens.pop(0)
            values.append(_literal(tokens, text))
        _after(tokens, ")", text)
        return Condition(column, min(values), max(values), tuple(values))
    _keyword(tokens, "BETWEEN", text)
    low = _literal(tokens, text)
    _keyword(tokens, "AND", text)
    return Condition(column, low, _literal(tokens, text))
