"""What the trim forecast evaluates, as plain data: per query and queue the queue's trimming config and, per
partition, the query's next row, the queue's counters, the vital consumers' smallest offset and the next row's age."""

from __future__ import annotations

from collections import deque
from collections.abc import Hashable
from dataclasses import dataclass

from streaming_core.auto_trim import AutoTrimConfig


@dataclass(frozen=True)
class PartitionTrimFacts:
    """One partition: `vital_offset` is the smallest offset of the consumers vital for it (None: none is),
    `consumer_vital` whether the query's own consumer is one of them, `lag_seconds` the age of its next row to read
    (the lag check's; None when unknown)."""

    partition: int
    next_row: int
    row_count: int
    trimmed_row_count: int
    vital_offset: int | None
    consumer_vital: bool = False
    lag_seconds: float | None = None


@dataclass(frozen=True)
class QueueTrimFacts:
    """One queue of one query at time `at`; `problem` when its positions or retention are unknown."""

    query: str
    queue: str
    consumer: str
    at: float
    auto_trim: AutoTrimConfig | None
    partitions: tuple[PartitionTrimFacts, ...] = ()
    problem: str | None = None
    #: Whether the cluster's trimming runs at all (YTsaurus: the Queue Agent's `enable_automatic_trimming`).
    automatic_trimming: bool | None = None


@dataclass(frozen=True)
class Sample:
    """A partition at one reading, as the rate window keeps it."""

    at: float
    next_row: int
    row_count: int
    vital_offset: int | None

    @classmethod
    def of(cls, at: float, p: PartitionTrimFacts) -> Sample:
        return cls(at, p.next_row, p.row_count, p.vital_offset)


class Window:
    """Per key (query, queue, partition) the samples of the last `seconds`, oldest first: the rates' window."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self._samples: dict[Hashable, deque[Sample]] = {}

    def samples(self, key: Hashable) -> tuple[Sample, ...]:
        return tuple(self._samples.get(key, ()))

    def add(self, key: Hashable, sample: Sample) -> None:
        samples = self._samples.setdefault(key, deque())
        if samples and sample.at <= samples[-1].at:
            return
        samples.append(sample)
        while len(samples) > 2 and samples[1].at <= sample.at - self.seconds:
            samples.popleft()

    def keep_only(self, keys: set[Hashable]) -> None:
        for key in set(self._samples) - keys:
            del self._samples[key]
