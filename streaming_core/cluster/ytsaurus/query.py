"""Names in the YT query language (`select_rows`), one function per kind: a table path in `[...]`, a column name in
`[...]`, a string literal. Every query the backend builds takes its names through these, so that a hostile path or
column name (`//q] WHERE 1=1 --`) is refused, never read as query text."""

from __future__ import annotations

import re

from ..errors import ClusterError

#: What a bracketed name must not hold: the brackets themselves and control characters.
_UNSAFE_IN_BRACKETS = re.compile(r"[\[\]\x00-\x1f\x7f]")


def table(path: str) -> str:
    """`[path]` of a table; `ClusterError` for a path that could end the brackets early."""
    return _bracketed(path, "table path")


def column(name: str) -> str:
    """`[name]` of a column; `ClusterError` for a name that could end the brackets early."""
    return _bracketed(name, "column name")


def string(text: str) -> str:
    """A string literal: quotes and backslashes escaped."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _bracketed(name: str, kind: str) -> str:
    found = _UNSAFE_IN_BRACKETS.search(name)
    if found:
        raise ClusterError(f"{kind} {name!r}: {found.group()!r} cannot appear in a query (the YT query language "
                           "brackets it); rename it")
    return f"[{name}]"
