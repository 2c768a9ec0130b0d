"""A queue's automatic trimming, as YTsaurus' Queue Agent applies it: the `@auto_trim_config` attribute and the row
count a partition is trimmed to. The one definition of the rule: the embedded cluster's queue agent trims by it and
opsd's trim forecast predicts by it.

The attribute (YTsaurus docs, "Automatic trimming"): `enable` turns trimming on; `retained_rows` keeps at least that
many of a partition's last rows; `retained_lifetime_duration` (milliseconds, a multiple of 1000) keeps the rows written
less than that long ago. A partition is trimmed up to the smallest offset of the consumers registered as vital for
it, never past what the two retention settings keep, and not at all without a vital consumer:

    trimmed = min(min(vital offsets), row_count - retained_rows, rows written before now - lifetime)

So a consumer that is not vital loses the rows it has not read once every vital consumer has read them and they fall
out of both retention settings; a vital consumer never loses a row, and holds back trimming for every other reader.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

#: The attribute of a queue that configures its automatic trimming.
AUTO_TRIM_ATTRIBUTE = "auto_trim_config"
_KEYS = ("enable", "retained_rows", "retained_lifetime_duration")


@dataclass(frozen=True)
class AutoTrimConfig:
    """A queue's `@auto_trim_config`; None for a retention setting that is not set."""

    enable: bool = False
    retained_rows: int | None = None
    retained_lifetime_seconds: float | None = None

    @classmethod
    def from_yt(cls, path: str, value: Any) -> AutoTrimConfig:
        """The attribute's value as YTsaurus takes it; `ValueError` naming the queue and the field otherwise (no
        cluster error: the forecast's pure steps import this module)."""
        if not isinstance(value, Mapping):
            raise ValueError(f"{path}/@{AUTO_TRIM_ATTRIBUTE}: expected a map of {', '.join(_KEYS)}, got {value!r}")
        unknown = sorted(set(value) - set(_KEYS))
        if unknown:
            raise ValueError(f"{path}/@{AUTO_TRIM_ATTRIBUTE}: unknown field {unknown[0]!r} (it takes "
                               f"{', '.join(_KEYS)})")
        enable = value.get("enable", False)
        if not isinstance(enable, bool):
            raise ValueError(f"{path}/@{AUTO_TRIM_ATTRIBUTE}/enable: expected true or false, got {enable!r}")
        rows = _count(path, "retained_rows", value.get("retained_rows"))
        millis = _count(path, "retained_lifetime_duration", value.get("retained_lifetime_duration"))
        if millis is not None and millis % 1000:
            raise ValueError(f"{path}/@{AUTO_TRIM_ATTRIBUTE}/retained_lifetime_duration: milliseconds, a multiple "
                               f"of 1000 (one second), got {millis}")
        return cls(enable, rows, None if millis is None else millis / 1000)

    def to_yt(self) -> dict[str, Any]:
        found: dict[str, Any] = {"enable": self.enable}
        if self.retained_rows is not None:
            found["retained_rows"] = self.retained_rows
        if self.retained_lifetime_seconds is not None:
            found["retained_lifetime_duration"] = round(self.retained_lifetime_seconds * 1000)
        return found


def _count(path: str, key: str, value: Any) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"{path}/@{AUTO_TRIM_ATTRIBUTE}/{key}: expected a whole number, 0 or more, got {value!r}")
    return value


def vital_for(partitions: Sequence[int] | None, partition: int) -> bool:
    """Whether a vital registration for `partitions` (None: every partition) holds back trimming of `partition`."""
    return partitions is None or partition in partitions


def trim_limit(config: AutoTrimConfig, *, row_count: int, vital_offsets: Sequence[int],
               written_before_barrier: int | None) -> int | None:
    """The row count a partition may be trimmed to now (None: not trimmed at all): the smallest vital offset, capped
    by what `retained_rows` keeps and by `written_before_barrier`, the number of the partition's first rows written
    more than `retained_lifetime_duration` ago (None when the lifetime rule is not set)."""
    if not config.enable or not vital_offsets:
        return None
    limit = min(min(vital_offsets), row_count)
    if config.retained_rows is not None:
        limit = min(limit, max(0, row_count - config.retained_rows))
    if config.retained_lifetime_seconds is not None:
        limit = min(limit, written_before_barrier if written_before_barrier is not None else 0)
    return limit
