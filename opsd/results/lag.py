"""The lag check's result (`opsd.checks.lag`): a query's unread rows and lag per partition, its smoothed rates and
time to drain."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from opsd.results.values import parsed


@dataclass(frozen=True)
class PartitionLag:
    queue: str
    partition: int
    unread_rows: int
    lag_seconds: float | None


@dataclass(frozen=True)
class QueryLag:
    """A query's lag: per partition, and the smoothed rates; time to drain is +Inf when it is not draining."""

    query: str
    partitions: tuple[PartitionLag, ...]
    input_rows_per_second: float | None
    processed_rows_per_second: float | None

    @property
    def backlog_rows(self) -> int:
        return sum(p.unread_rows for p in self.partitions)

    @property
    def time_to_drain_seconds(self) -> float | None:
        """None until two samples give the rates."""
        if self.backlog_rows == 0:
            return 0.0
        if self.input_rows_per_second is None or self.processed_rows_per_second is None:
            return None
        net = self.processed_rows_per_second - self.input_rows_per_second
        return self.backlog_rows / net if net > 0 else float("inf")

    @property
    def max_lag_seconds(self) -> float | None:
        known = [p.lag_seconds for p in self.partitions if p.lag_seconds is not None]
        return max(known) if known else None

    @classmethod
    def from_json(cls, doc: Mapping[str, Any], query: str) -> QueryLag:
        """The inverse of `to_json` (the backlog and the time to drain follow from the partitions and rates)."""
        partitions = tuple(PartitionLag(queue, int(n), parsed(int, p["unread_rows"]),
                                        parsed(float | None, p.get("lag_seconds")))
                           for queue, parts in (doc.get("queues") or {}).items() for n, p in parts.items())
        return cls(query, partitions, parsed(float | None, doc.get("input_rows_per_second")),
                   parsed(float | None, doc.get("processed_rows_per_second")))

    def to_json(self) -> Mapping[str, Any]:
        queues: dict[str, dict[int, Mapping[str, Any]]] = {}
        for p in self.partitions:
            queues.setdefault(p.queue, {})[p.partition] = {"unread_rows": p.unread_rows, "lag_seconds": p.lag_seconds}
        return {"backlog_rows": self.backlog_rows, "time_to_drain_seconds": self.time_to_drain_seconds,
                "input_rows_per_second": self.input_rows_per_second,
                "processed_rows_per_second": self.processed_rows_per_second, "queues": queues}
