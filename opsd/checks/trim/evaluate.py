"""Evaluate the trim forecast of a partition: when does the queue's trimming delete rows the query has not read? Pure:
the facts, the partition's recent samples and nothing else.

The Queue Agent trims to `min(vital offset, row_count - retained_rows, rows older than the lifetime)`
(`streaming_core.auto_trim`), so the query's next row `c` is deleted once all three limits have passed it.
Each limit closes on `c` at its own speed, from the rates over the window (rows written `w`, rows the query moves past
`r`, rows the slowest vital consumer moves past `v`, per second):

- vital consumers: `(c - vital) / (v - r)`; 0 when every vital consumer is past `c` already;
- `retained_rows`: `(retained_rows - unread) / (w - r)`: the unread rows reach the kept rows;
- `retained_lifetime_duration`: `(lifetime - age of c) / (1 - r / w)`: the next row ages one second a second, less
  the seconds of writing the query reads through (rows written evenly at `w`); with nothing written, as if it stood.

The time until loss is the latest of the three (a limit not set is passed already); +Inf when one never closes at
the current rates. The rule with the latest time is `binding`: the one that holds the rows longest, and so the one
to raise (of limits all passed already, a retention rule). With the cluster's automatic trimming switched off (YTsaurus:
the Queue Agent's `enable_automatic_trimming`, off by default), no auto-trim, no vital consumer for the partition, or
the query's own consumer vital, the Queue Agent never deletes an unread row: +Inf, whatever the rates.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from opsd.checks.trim.facts import PartitionTrimFacts, QueueTrimFacts, Sample
from opsd.results.trim import TRIM_RULES, PartitionTrim, QueueTrim, TrimOutlook, TrimRule
from streaming_core.auto_trim import AutoTrimConfig
from streaming_core.offsets import unread_rows

INF = math.inf


def rates(samples: Sequence[Sample]) -> tuple[float, float, float | None] | None:
    """(written, read, slowest vital consumer's) rows per second between the first and last samples; None with fewer
    than two samples (the vital rate None when a sample has no vital consumer)."""
    if len(samples) < 2 or samples[-1].at <= samples[0].at:
        return None
    first, last = samples[0], samples[-1]
    elapsed = last.at - first.at
    vital = None if first.vital_offset is None or last.vital_offset is None else \
        max(0.0, (last.vital_offset - first.vital_offset) / elapsed)
    return (max(0.0, (last.row_count - first.row_count) / elapsed),
            max(0.0, (last.next_row - first.next_row) / elapsed), vital)


def _closing(gap: float, speed: float) -> float:
    """Seconds until a gap closes at a speed: 0 when closed, +Inf when it does not close."""
    if gap <= 0:
        return 0.0
    return gap / speed if speed > 0 else INF


def forecast(p: PartitionTrimFacts, config: AutoTrimConfig | None, queue: str, samples: Sequence[Sample], *,
             automatic_trimming: bool | None = None) -> PartitionTrim:
    """The partition's forecast; `samples` are its earlier samples and this one, oldest first; `automatic_trimming`
    whether the cluster's trimming runs at all (None: unknown, as if it did)."""
    next_row = max(p.next_row, p.trimmed_row_count)
    unread = unread_rows(p.next_row, p.row_count, p.trimmed_row_count)

    def verdict(outlook: TrimOutlook, eta: float | None, binding: TrimRule | None = None,
                measured: tuple[float, float, float | None] | None = None) -> PartitionTrim:
        return PartitionTrim(queue, p.partition, outlook, eta, unread, binding,
                             measured[0] if measured else None, measured[1] if measured else None)

    if config is None or not config.enable:
        return verdict(TrimOutlook.NO_AUTO_TRIM, INF)
    if automatic_trimming is False:
        return verdict(TrimOutlook.CLUSTER_TRIMMING_OFF, INF)
    if p.vital_offset is None:
        return verdict(TrimOutlook.NO_VITAL_CONSUMER, INF)
    if p.consumer_vital:
        return verdict(TrimOutlook.CONSUMER_VITAL, INF)
    measured = rates(samples)
    etas = _etas(p, config, next_row, unread, measured)
    if any(eta == INF for eta in etas.values()):
        return verdict(TrimOutlook.NOT_APPROACHING, INF, next(r for r, eta in etas.items() if eta == INF), measured)
    if any(eta is None for eta in etas.values()):
        return verdict(TrimOutlook.UNKNOWN, None, None, measured)
    # Ties (every limit past already: pending) go to a retention rule, which raising would stop.
    binding, eta = max(etas.items(), key=lambda item: (item[1], TRIM_RULES.index(item[0])))
    return verdict(TrimOutlook.PENDING if eta == 0 else TrimOutlook.APPROACHING, eta, binding, measured)


def _etas(p: PartitionTrimFacts, config: AutoTrimConfig, next_row: int, unread: int,
          measured: tuple[float, float, float | None] | None) -> dict[TrimRule, float | None]:
    """Seconds until each configured rule's limit passes the next row (None: unknown)."""
    written, read, vital = measured if measured else (None, None, None)
    gap = next_row - (p.vital_offset or 0) + 1  # the vital limit passes row c at c + 1
    etas: dict[TrimRule, float | None] = {
        TrimRule.VITAL_CONSUMERS: 0.0 if gap <= 0 else None if vital is None or read is None
        else _closing(gap, vital - read)}
    if config.retained_rows is not None:
        kept = config.retained_rows - unread + 1
        etas[TrimRule.RETAINED_ROWS] = 0.0 if kept <= 0 else None if written is None or read is None else \
            _closing(kept, written - read)
    if config.retained_lifetime_seconds is not None:
        age = 0.0 if unread == 0 else p.lag_seconds
        left = None if age is None else config.retained_lifetime_seconds - age
        if left is not None and left <= 0:
            etas[TrimRule.RETAINED_LIFETIME] = 0.0
        elif left is None or written is None or read is None:
            etas[TrimRule.RETAINED_LIFETIME] = None
        elif unread == 0 and written == 0:
            etas[TrimRule.RETAINED_LIFETIME] = INF  # nothing to lose until rows come
        else:
            etas[TrimRule.RETAINED_LIFETIME] = _closing(left, 1.0 - read / written if written > 0 else 1.0)
    return etas


def evaluate(facts: QueueTrimFacts, samples: dict[int, Sequence[Sample]]) -> QueueTrim:
    """The queue's forecast per partition; `samples[partition]`: its samples, this reading's last."""
    if facts.problem:
        return QueueTrim(facts.query, facts.queue, facts.consumer, facts.auto_trim, problem=facts.problem)
    return QueueTrim(facts.query, facts.queue, facts.consumer, facts.auto_trim,
                     tuple(forecast(p, facts.auto_trim, facts.queue, samples.get(p.partition, ()),
                                    automatic_trimming=facts.automatic_trimming)
                           for p in facts.partitions))
