"""Row values in failure texts: Spark's, Python's and Arrow's error messages quote the value that failed (a string
that did not cast, a row that broke a constraint, a `Row(...)` in a `foreachBatch` error), and those are other
people's data. `/status` serves failure texts without them unless the config asks (`http.status_row_values`).

`without_row_values(text)` replaces each value quoted in one of `FORMS` with `ROW_VALUE`, leaving the rest of the
message (what failed, the types, the stack) as it was; `without_row_values_in(document)` does it to every string of a
JSON-like document. The forms, each as the message templates write it:

- Spark SQL (`error-conditions.json` of Spark 4.2): `The value <v> of the type` (CAST_INVALID_INPUT, CAST_OVERFLOW),
  `The value <v> (<fmt>) cannot be converted` (CONVERSION_INVALID_INPUT), `The value <v> cannot be interpreted`
  (NUMERIC_OUT_OF_SUPPORTED_RANGE), `The input string <v> cannot be parsed` (CANNOT_PARSE_TIME, ...), `violated by
  row with values: <v>` (CHECK_CONSTRAINT_VIOLATION), `the row value <v> of the class` (FAILED_ROW_TO_JSON),
  `found in string: <v>` (INVALID_UTF8_STRING), `Failed to cast value <v> to data type` (INVALID_PARTITION_VALUE),
  and the user's own text of `raise_error` (`[USER_RAISED_EXCEPTION] <v>`);
- Java: `For input string: "<v>"` (`NumberFormatException`), `Text '<v>' could not be parsed` (`java.time`);
- Python: `invalid literal for int() with base 10: <v>`, `could not convert string to float: <v>`, and `Row(...)`;
- Arrow: `Could not convert <v> with type`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

#: What a row value is replaced with.
ROW_VALUE = "<row value>"
# A value as messages quote it: a SQL string literal ('...' with \' escapes, perhaps typed: DATE '...'), a double-quoted
# string, a Python repr, or a bare token (123L, 1.5E10D, NULL).
_VALUE = r"""(?:[A-Z]+ )?'(?:[^'\\\n]|\\.)*'|"(?:[^"\\\n]|\\.)*"|b'(?:[^'\\\n]|\\.)*'|[^\s,()]+"""
FORMS = tuple(re.compile(form, re.MULTILINE) for form in (
    rf"\bThe value (?P<value>{_VALUE}) (?=of the type|\(|cannot be interpreted)",
    rf"\bThe input string (?P<value>{_VALUE}) cannot be parsed",
    r"\bviolated by row with values:(?P<value>(?:\n - [^\n]*)+| [^\n]+)",
    rf"\bthe row value (?P<value>{_VALUE}) of the class",
    rf"\bfound in string: (?P<value>{_VALUE})",
    rf"\bFailed to cast value (?P<value>{_VALUE}) to data type",
    r"\[USER_RAISED_EXCEPTION\] (?P<value>.+?)(?= SQLSTATE: |$)",
    rf"\bFor input string: (?P<value>{_VALUE})",
    rf"\bText (?P<value>{_VALUE}) could not be parsed",
    rf"\binvalid literal for \w+\(\) with base \d+: (?P<value>{_VALUE})",
    rf"\bcould not convert string to \w+: (?P<value>{_VALUE})",
    rf"\bCould not convert (?P<value>{_VALUE}) with type",
))
_ROW = re.compile(r"\bRow\(")


def without_row_values(text: str) -> str:
    """`text` with every row value quoted in one of `FORMS`, and the inside of every `Row(...)`, as `ROW_VALUE`."""
    for form in FORMS:
        text = form.sub(_masked, text)
    return _without_rows(text)


def _masked(match: re.Match[str]) -> str:
    start, end = match.span("value")
    return match.string[match.start():start] + ROW_VALUE + match.string[end:match.end()]


def _without_rows(text: str) -> str:
    """Each `Row(...)` as `Row(<row value>)`; its inside runs to the matching parenthesis (or the end of the line)."""
    parts, at = [], 0
    for match in _ROW.finditer(text):
        if match.start() < at:
            continue  # a Row(...) inside one already replaced
        depth, end = 1, match.end()
        while end < len(text) and depth and text[end] != "\n":
            depth += {"(": 1, ")": -1}.get(text[end], 0)
            end += 1
        parts += [text[at:match.end()], ROW_VALUE + (")" if depth == 0 else "")]
        at = end
    return "".join(parts) + text[at:]


def without_row_values_in(document: Any) -> Any:
    """`document` (JSON-like) with `without_row_values` applied to every string, in new containers."""
    if isinstance(document, str):
        return without_row_values(document)
    if isinstance(document, Mapping):
        return {key: without_row_values_in(value) for key, value in document.items()}
    if isinstance(document, list | tuple):
        return [without_row_values_in(item) for item in document]
    return document
