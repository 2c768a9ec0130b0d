"""The vital-consumer audit (`opsd.checks.vital`): a vital consumer of a queue a query reads, and whether it stands
still while rows wait."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from opsd.results.values import frozen_mapping


@dataclass(frozen=True)
class VitalConsumerAudit:
    """A consumer registered as vital for a queue a query reads (the query's own or another job's): the rows waiting
    for it, how long opsd has seen it stand still while rows wait (0 while it advances or nothing waits;
    `since`: from when), the partitions it holds back, and whether that is past the level to act at (`stalled`, set
    by the decide step)."""

    queue: str
    consumer: str
    waiting_rows: int
    stalled_seconds: float
    since: float | None
    offsets: Mapping[int, int] = field(default_factory=dict)
    own: bool = False
    stalled: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "offsets", frozen_mapping(self.offsets))

    def to_json(self) -> Mapping[str, Any]:
        return {"queue": self.queue, "consumer": self.consumer, "own": self.own, "waiting_rows": self.waiting_rows,
                "stalled_seconds": self.stalled_seconds, "since": self.since, "stalled": self.stalled,
                "offsets": self.offsets}
