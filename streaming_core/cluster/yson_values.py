"""YSON values as plain Python ones: the one conversion for everything parsed from YSON (node values and attributes
of the YTsaurus backend and the stand-in, composite column values of the connector).

`plain` drops YSON attributes and the `Yson*` wrapper types: `#` (an entity) becomes None, `%true` a bool, maps
dicts with plain keys, lists lists, strings `str` (bytes decoded as UTF-8, undecodable bytes kept as surrogate
escapes so that they survive a round trip), numbers `int` or `float`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from yt import yson


def plain(value: Any) -> Any:
    """`value` (a parsed YSON value, `YsonMap`, `YsonEntity`, ...) as plain Python, attributes dropped."""
    if isinstance(value, yson.YsonEntity):
        return None
    if isinstance(value, Mapping):
        return {plain(k): plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [plain(v) for v in value]
    if isinstance(value, bool | yson.YsonBoolean):
        return bool(value)
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="surrogateescape")
    for base in (int, float, str):
        if isinstance(value, base):
            return base(value)
    return value
