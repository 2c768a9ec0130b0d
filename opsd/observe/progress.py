"""Batch progress: a StreamingQueryProgress (its JSON form) parsed into small frozen data objects.

The listener hands opsd ``event.progress.json``; everything downstream (metrics, status, watchdog)
works on :class:`BatchProgress` instead of raw dicts, so the knowledge of Spark's progress format and
of the ``yt`` source's offset shape lives here only. All functions are pure.

The ``yt`` source's offsets (``sources[i].startOffset / endOffset / latestOffset``) are
`streaming_core.offsets.QueueOffset` JSON, parsed by it; other sources (rate, files) have offsets of other
shapes, which are kept as "not a yt offset" rather than rejected.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from opsd.results.values import frozen_mapping
from streaming_core.offsets import QueueOffset, unread_rows

# Spark reports the watermark as the epoch until the first batch with data moves it.
_NO_WATERMARK = 0.0


@dataclass(frozen=True)
class PartitionOffsets:
    """Where a micro-batch stood on one queue partition."""

    queue: str
    partition: int
    start: int | None
    end: int | None
    latest: int | None

    @property
    def backlog_rows(self) -> int | None:
        """Rows available but not yet read by the batch (never negative); None when unknown."""
        if self.latest is None or self.end is None:
            return None
        return unread_rows(self.end + 1, self.latest + 1)


@dataclass(frozen=True)
class SourceProgress:
    """One source of a micro-batch; the offsets are set only for ``yt``-shaped offsets."""

    description: str
    num_input_rows: int
    start_offset: QueueOffset | None = None
    end_offset: QueueOffset | None = None
    latest_offset: QueueOffset | None = None

    @property
    def partitions(self) -> tuple[PartitionOffsets, ...]:
        """Per-partition offsets of a ``yt`` source (empty for other sources)."""
        known = [o for o in (self.end_offset, self.latest_offset, self.start_offset) if o is not None]
        if not known:
            return ()
        queue = known[0].path
        indexes = sorted({i for offset in known for i in offset.partitions})

        def at(offset: QueueOffset | None, index: int) -> int | None:
            return None if offset is None else offset.partitions.get(index)

        return tuple(
            PartitionOffsets(
                queue=queue,
                partition=i,
                start=at(self.start_offset, i),
                end=at(self.end_offset, i),
                latest=at(self.latest_offset, i),
            )
            for i in indexes
        )


@dataclass(frozen=True)
class StateOperator:
    """A stateful operator; ``name`` is ``operatorName_index`` so that two joins stay apart."""

    name: str
    num_rows_total: int
    num_rows_updated: int
    memory_used_bytes: int
    num_rows_dropped_by_watermark: int


@dataclass(frozen=True)
class BatchSummary:
    """One completed micro-batch as opsd keeps it (`QueryStatus.last_progress` and `recent_batches`): the one type
    the auto-tuner, the OOM check, the demo and `/status` read a batch by. `duration_seconds` is the batch's trigger
    execution (None when Spark did not report one); `durations_seconds` its phases as Spark names them."""

    batch_id: int
    num_input_rows: int = 0
    #: Rows the batch read from its largest ``yt`` partition (what ``max_rows_per_partition`` caps); None when no
    #: source reports a range.
    largest_partition_rows: int | None = None
    duration_seconds: float | None = None
    durations_seconds: Mapping[str, float] = field(default_factory=dict)
    timestamp: float | None = None
    input_rows_per_second: float | None = None
    processed_rows_per_second: float | None = None
    sink_output_rows: int | None = None
    watermark_delay_seconds: float | None = None
    backlog_rows: int | None = None
    state_rows: int = 0
    state_memory_bytes: int = 0

    def __post_init__(self) -> None:
        object.__setattr__(self, "durations_seconds", frozen_mapping(self.durations_seconds))


@dataclass(frozen=True)
class BatchProgress:
    """The parts of one micro-batch's progress that opsd exports, checks and shows."""

    query: str
    id: str
    run_id: str
    batch_id: int
    timestamp: float
    durations_seconds: Mapping[str, float] = field(default_factory=dict)
    num_input_rows: int = 0
    input_rows_per_second: float | None = None
    processed_rows_per_second: float | None = None
    sink_output_rows: int | None = None
    watermark: float | None = None
    state_operators: tuple[StateOperator, ...] = ()
    sources: tuple[SourceProgress, ...] = ()

    @property
    def watermark_delay_seconds(self) -> float | None:
        """How far event time lags behind the batch's processing time."""
        return None if self.watermark is None else self.timestamp - self.watermark

    @property
    def partitions(self) -> tuple[PartitionOffsets, ...]:
        """Per-partition offsets of all ``yt`` sources of the query."""
        return tuple(p for source in self.sources for p in source.partitions)

    @property
    def backlog_rows(self) -> int | None:
        """Total known backlog over all ``yt`` partitions; None when no source reports one."""
        known = [p.backlog_rows for p in self.partitions if p.backlog_rows is not None]
        return sum(known) if known else None

    @property
    def largest_partition_rows(self) -> int | None:
        """Rows the batch read from its largest ``yt`` partition (what ``max_rows_per_partition`` caps); None when
        no source reports a range."""
        known = [p.end - p.start for p in self.partitions if p.start is not None and p.end is not None]
        return max(known) if known else None

    def summary(self) -> BatchSummary:
        """What opsd keeps of the batch (full progress is too large to keep or serve per query)."""
        return BatchSummary(
            batch_id=self.batch_id,
            num_input_rows=self.num_input_rows,
            largest_partition_rows=self.largest_partition_rows,
            duration_seconds=self.durations_seconds.get("triggerExecution"),
            durations_seconds=self.durations_seconds,
            timestamp=self.timestamp,
            input_rows_per_second=self.input_rows_per_second,
            processed_rows_per_second=self.processed_rows_per_second,
            sink_output_rows=self.sink_output_rows,
            watermark_delay_seconds=self.watermark_delay_seconds,
            backlog_rows=self.backlog_rows,
            state_rows=sum(op.num_rows_total for op in self.state_operators),
            state_memory_bytes=sum(op.memory_used_bytes for op in self.state_operators),
        )


def parse_timestamp(text: str) -> float:
    """Spark's ISO-8601 UTC timestamps (``2026-01-02T03:04:05.678Z``) to unix seconds."""
    return datetime.fromisoformat(text).timestamp()


def parse_progress(progress: str | Mapping[str, Any]) -> BatchProgress:
    """Parse ``StreamingQueryProgress.json`` (string) or its dict form.

    Raises ``ValueError`` / ``KeyError`` when mandatory fields (id, runId, batchId, timestamp) are
    missing: that is not a progress event and the caller counts it as an error.
    """
    data: Mapping[str, Any] = json.loads(progress) if isinstance(progress, str) else progress
    timestamp = parse_timestamp(data["timestamp"])
    watermark_text = (data.get("eventTime") or {}).get("watermark")
    watermark = parse_timestamp(watermark_text) if watermark_text else None
    sink_rows = (data.get("sink") or {}).get("numOutputRows")
    return BatchProgress(
        query=data.get("name") or str(data["id"]),
        id=str(data["id"]),
        run_id=str(data["runId"]),
        batch_id=int(data["batchId"]),
        timestamp=timestamp,
        durations_seconds={phase: ms / 1000.0 for phase, ms in (data.get("durationMs") or {}).items()},
        num_input_rows=int(data.get("numInputRows") or 0),
        input_rows_per_second=_finite(data.get("inputRowsPerSecond")),
        processed_rows_per_second=_finite(data.get("processedRowsPerSecond")),
        sink_output_rows=None if sink_rows is None or sink_rows < 0 else int(sink_rows),
        watermark=None if watermark in (None, _NO_WATERMARK) else watermark,
        state_operators=tuple(
            _state_operator(op, index) for index, op in enumerate(data.get("stateOperators") or ())
        ),
        sources=tuple(_source(source) for source in data.get("sources") or ()),
    )


def _finite(value: object) -> float | None:
    """Spark omits NaN rates from JSON, and the dict form may carry them; both mean unknown."""
    if value is None:
        return None
    number = float(value)  # type: ignore[arg-type]
    return number if math.isfinite(number) else None


def _state_operator(data: Mapping[str, Any], index: int) -> StateOperator:
    return StateOperator(
        name=f"{data.get('operatorName') or 'operator'}_{index}",
        num_rows_total=int(data.get("numRowsTotal") or 0),
        num_rows_updated=int(data.get("numRowsUpdated") or 0),
        memory_used_bytes=int(data.get("memoryUsedBytes") or 0),
        num_rows_dropped_by_watermark=int(data.get("numRowsDroppedByWatermark") or 0),
    )


def _source(data: Mapping[str, Any]) -> SourceProgress:
    return SourceProgress(
        description=str(data.get("description") or ""),
        num_input_rows=int(data.get("numInputRows") or 0),
        start_offset=QueueOffset.from_progress(data.get("startOffset")),
        end_offset=QueueOffset.from_progress(data.get("endOffset")),
        latest_offset=QueueOffset.from_progress(data.get("latestOffset")),
    )
