"""Queue offsets as Spark checkpoints and SPYT store them, and the arithmetic of batch boundaries.

Checkpoint JSON per queue: `{"cluster": "...", "path": "//...", "partitions": {"0": 41, "1": -1}}`, each
value the index of the last row already read (consumer offset - 1; -1 = nothing read). This connector
adds `"consumer_path"` so that opsd can find the consumer of any query from its progress events; SPYT's
JVM connector omits it and both forms are read. This module is the one parser of that JSON (the source, opsd's
progress parsing and its checkpoint readers all use `QueueOffset`), and the one place for the arithmetic of a
partition's rows: batch boundaries and unread rows.

A queue may gain tablets while a query reads it (a reshard to more tablets): an offset written before names fewer
partitions than the queue has. The partitions it does not name are new and start where the consumer stands (its
offset, or 0): `effective_start`. Partitions it names that the queue no longer has (`removed_partitions`) are a change
no running query can follow.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

#: The JVM's int and long ranges: SPYT's `YtQueueOffset` keys partitions by int and holds last-read rows as longs
#: (-1: nothing read); Spark's batch ids and times are longs.
JVM_INT_MAX = 2**31 - 1
JVM_LONG_MAX = 2**63 - 1
_PARTITION_KEY = re.compile(r"0|[1-9][0-9]{0,9}")


@dataclass(frozen=True)
class QueueOffset:
    """Per partition, the last row index already read."""

    cluster: str
    path: str
    partitions: dict[int, int]
    consumer_path: str | None = field(default=None, compare=False)

    @classmethod
    def from_json(cls, value: Mapping[str, Any]) -> QueueOffset:
        """Parse the JSON dict form (keys of `partitions` come back from JSON as strings).

        Strict, as SPYT's JVM types are: text where text belongs, partitions keyed by decimal numbers (ASCII digits,
        a JVM int) and a JSON integer per partition from -1 to a JVM long's maximum; no bool, float or digit text.
        `ValueError` names the field at fault (`not a yt queue offset: ...`), never a traceback of the wrong type.
        """
        if not isinstance(value, Mapping):
            raise ValueError(f"not a yt queue offset: a JSON object is expected, found {type(value).__name__}")
        fields = {name: value.get(name) for name in ("cluster", "path")}
        wrong = [name for name, v in fields.items() if not isinstance(v, str)]
        consumer = value.get("consumer_path")
        if consumer is not None and not isinstance(consumer, str):
            wrong.append("consumer_path")
        if wrong:
            raise ValueError(f"not a yt queue offset: {', '.join(wrong)} must be text")
        return cls(fields["cluster"], fields["path"], _partitions(value.get("partitions")), consumer)

    @classmethod
    def from_progress(cls, value: object) -> QueueOffset | None:
        """An offset as Spark's progress shows it (an object, or a JSON string); None for any other shape, such
        as the offsets of other sources (rate, files)."""
        if isinstance(value, str):
            try:
                value = json.loads(value)
            except (ValueError, RecursionError):  # a crafted checkpoint's line reaches progress through Spark
                return None
        if not isinstance(value, Mapping) or not isinstance(value.get("path"), str):
            return None
        try:
            return cls.from_json(value)
        except ValueError:
            return None

    def to_json(self) -> dict[str, Any]:
        value: dict[str, Any] = {
            "cluster": self.cluster,
            "path": self.path,
            "partitions": {str(k): v for k, v in sorted(self.partitions.items())},
        }
        if self.consumer_path:
            value["consumer_path"] = self.consumer_path
        return value


def _partitions(value: object) -> dict[int, int]:
    if not isinstance(value, Mapping):
        raise ValueError(f"not a yt queue offset: partitions must be an object of partition: last read row, "
                         f"found {described(value)}")
    parsed = {}
    for key, last in value.items():
        if not isinstance(key, str) or not _PARTITION_KEY.fullmatch(key) or int(key) > JVM_INT_MAX:
            raise ValueError(f"not a yt queue offset: a partition key of {len(str(key))} characters is not a partition "
                             f"number (decimal digits 0-9, at most {JVM_INT_MAX})")
        if type(last) is not int or not -1 <= last <= JVM_LONG_MAX:
            raise ValueError(f"not a yt queue offset: partition {key}: last read row {described(last)} is not an "
                             f"integer from -1 to {JVM_LONG_MAX}")
        parsed[int(key)] = last
    return parsed


def described(value: object) -> str:
    """A value read from a checkpoint or an offset, for an error message, by its kind and never its content (a crafted
    file may hold what it should not): a JSON integer as its digits (cut by `shorten`), anything else by its type."""
    if type(value) is int:
        return shorten(str(value))
    return f"(a JSON {JSON_KINDS.get(type(value), type(value).__name__)})"


#: Python's types of parsed JSON values, by their JSON names.
JSON_KINDS = {bool: "boolean", float: "number with a fraction", str: "string", list: "array", dict: "object",
              type(None): "null"}


def shorten(text: str, limit: int = 80) -> str:
    """Text from a file or an offset, cut to `limit` characters for an error message (a crafted value can be megabytes
    long)."""
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text)} characters)"


def from_consumer(committed: Mapping[int, int], partition_count: int) -> dict[int, int]:
    """Last-read indices from a consumer's committed offsets (next row to read)."""
    return {p: committed.get(p, 0) - 1 for p in range(partition_count)}


def effective_start(checkpoint: Mapping[int, int], consumer: Mapping[int, int]) -> dict[int, int]:
    """Per partition of the queue (`consumer` names each: `from_consumer`), the checkpointed start unless the consumer
    is ahead of it (SPYT's rule); a partition the checkpoint does not name yet (added to the queue since) starts where
    the consumer stands."""
    return {p: max(checkpoint.get(p, -1), last) for p, last in consumer.items()}


def removed_partitions(partitions: Iterable[int], partition_count: int) -> list[int]:
    """The partitions an offset names that a queue of `partition_count` tablets does not have (tablets removed)."""
    return sorted(p for p in partitions if p >= partition_count)


def added_partitions(partitions: Iterable[int], partition_count: int) -> list[int]:
    """The partitions of a queue of `partition_count` tablets that an offset does not name (tablets added since)."""
    named = set(partitions)
    return [p for p in range(partition_count) if p not in named]


def batch_end(start: Mapping[int, int], upper: Mapping[int, int], cap: int | None) -> dict[int, int]:
    """`end_i = min(start_i + cap, upper_i)` in last-read terms; `upper_i` is the last existing row."""
    return {p: max(last, min(last + cap, upper[p]) if cap else upper[p]) for p, last in start.items()}


def unread_rows(next_row: int, row_count: int, trimmed_row_count: int = 0) -> int:
    """Rows of a partition not read yet: from the next row to read (or the trim, if later) to the end; never < 0.

    `next_row` is a consumer offset (last-read index + 1), `row_count` the partition's total row count.
    """
    return max(0, row_count - max(next_row, trimmed_row_count))
