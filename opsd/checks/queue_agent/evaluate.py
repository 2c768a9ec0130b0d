"""Evaluate a queue's signals: the Queue Agent's where it serves them, opsd's own where it does not. Pure.

Served (shaped as the agent builds them): the queue's `write_row_count_rate` (`1m`) in `@queue_status` and per
partition in `@queue_partitions`; per partition of `@queue_consumer_partitions[cluster:queue]` the consumer's
`disposition`, `unread_row_count` and `processing_lag` (milliseconds; 0 while the agent cannot tell, as it cannot
without the queue's commit times). An attribute that is absent, an error (`{"error": ...}`) or of another shape than
the queue's partitions counts as not served, for that attribute alone.

opsd's own: the write rate from the queue's row counts in two readings; the disposition and unread rows from the
consumer's offset against the queue's counters (the agent's rules); the processing lag from the lag check.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from opsd.checks.queue_agent.facts import Served
from opsd.results.lag import QueryLag
from opsd.results.positions import PartitionPositions, QueuePositions
from opsd.results.queue_agent import Disposition, PartitionSignals, QueueSignals

#: `{(queue, partition): (unix seconds, row count)}` of the previous reading.
RowCounts = Mapping[tuple[str, int], tuple[float, int]]
#: The window of the Queue Agent's rates read.
RATE_WINDOW = "1m"


def _listed(value: Any, length: int) -> list[Mapping[str, Any]] | None:
    """The per-partition maps, or None when the value is not served for every partition (or is an error)."""
    if not isinstance(value, list) or len(value) != length:
        return None
    if not all(isinstance(p, Mapping) and "error" not in p for p in value):
        return None
    return value


def _rate(value: Any) -> float | None:
    rate = value.get(RATE_WINDOW) if isinstance(value, Mapping) else None
    return float(rate) if isinstance(rate, int | float) and not isinstance(rate, bool) else None


def _number(value: Any) -> int | None:
    return int(value) if isinstance(value, int) and not isinstance(value, bool) else None


def own_disposition(p: PartitionPositions) -> Disposition:
    """The agent's rules on the consumer's offset and the queue's counters."""
    if p.consumer_offset < p.trimmed_row_count:
        return Disposition.EXPIRED
    if p.consumer_offset > p.row_count:
        return Disposition.AHEAD
    return Disposition.UP_TO_DATE if p.consumer_offset == p.row_count else Disposition.PENDING_CONSUMPTION


def _disposition(value: Any) -> Disposition | None:
    try:
        return Disposition(value)
    except ValueError:
        return None


def evaluate(positions: QueuePositions, served: Served, previous: RowCounts, at: float,
             lag: QueryLag | None = None) -> QueueSignals:
    """The queue's signals at `at` (the reading's time), from what was served, else from opsd's own measurements."""
    count = len(positions.partitions)
    partitions = _listed(served.queue_partitions, count)
    consumer = served.consumer_partitions.get(served.reference) \
        if isinstance(served.consumer_partitions, Mapping) else None
    consumer = _listed(consumer, count)
    lags = {p.partition: p.lag_seconds for p in lag.partitions if p.queue == positions.queue} if lag else {}
    found = []
    for i, p in enumerate(positions.partitions):
        seen = previous.get((positions.queue, p.partition))
        own_rate = (p.row_count - seen[1]) / (at - seen[0]) if seen and at > seen[0] else None
        rate = _rate(partitions[i].get("write_row_count_rate")) if partitions else None
        disposition = _disposition(consumer[i].get("disposition")) if consumer else None
        unread = _number(consumer[i].get("unread_row_count")) if consumer else None
        lag_ms = _number(consumer[i].get("processing_lag")) if consumer else None
        served_lag = None if lag_ms is None or (lag_ms == 0 and disposition == Disposition.PENDING_CONSUMPTION) \
            else lag_ms / 1000
        found.append(PartitionSignals(
            p.partition, own_rate if rate is None else rate,
            max(0, p.row_count - p.consumer_offset) if unread is None else unread,
            own_disposition(p) if disposition is None else disposition,
            lags.get(p.partition) if served_lag is None else served_lag))
    status = served.queue_status if isinstance(served.queue_status, Mapping) else {}
    served_total = _rate(status.get("write_row_count_rate")) if "error" not in status else None
    rates = [p.write_rows_per_second for p in found]
    own_total = sum(r for r in rates if r is not None) if rates and None not in rates else None
    served_any = partitions is not None or consumer is not None or served_total is not None
    return QueueSignals(positions.query, positions.queue, positions.consumer, served_any,
                        own_total if served_total is None else served_total, tuple(found))
