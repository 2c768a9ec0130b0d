"""Durations in the config: one parser for every duration, in the forms Spark itself accepts.

Spark's time strings (`30s`, `1m`, `500ms`, `2h`, `1d`, `100us`) and its interval words (`2 seconds`,
`500 milliseconds`, `interval 1 minute`), with decimals; a bare number only where the key has a unit of its
own (the seeds' graceful-shutdown timeout is in milliseconds).
"""

from __future__ import annotations

import re

_SECONDS_PER_UNIT = {
    "us": 1e-6, "microsecond": 1e-6,
    "ms": 1e-3, "millisecond": 1e-3,
    "s": 1.0, "sec": 1.0, "second": 1.0,
    "m": 60.0, "min": 60.0, "minute": 60.0,
    "h": 3600.0, "hour": 3600.0,
    "d": 86400.0, "day": 86400.0,
}
_DURATION = re.compile(r"^\s*(?:interval\s+)?(\d+(?:\.\d+)?)\s*([a-z]*)\s*$", re.IGNORECASE)
EXAMPLES = "'30s', '1m', '500ms', '2 seconds', 'interval 1 minute'"


def parse_duration_seconds(text: str | int | float, *, bare_unit: str | None = None) -> float:
    """Seconds in `text`; a bare number is in `bare_unit` (e.g. "ms"), or an error when it is None.

    Raises `ValueError` naming the accepted forms.
    """
    match = _DURATION.match(str(text))
    unit = match.group(2).lower() if match else ""
    if unit and unit not in _SECONDS_PER_UNIT:
        unit = unit.removesuffix("s") if unit.removesuffix("s") in _SECONDS_PER_UNIT else "?"
    if not match or unit == "?" or (not unit and bare_unit is None):
        bare = f", or a bare number of {bare_unit}" if bare_unit else ""
        raise ValueError(f"{text!r} is not a duration like {EXAMPLES}{bare}")
    return float(match.group(1)) * _SECONDS_PER_UNIT[unit or bare_unit]


def spark_interval(seconds: float) -> str:
    """A duration in the one form every Spark API takes (`DataStreamWriter.trigger(processingTime=...)`)."""
    return f"{round(seconds * 1000)} milliseconds"
