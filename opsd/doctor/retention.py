"""Advice on a queue's trimming: rows the query has not read that the queue's auto-trim is about to delete (the trim
forecast, `opsd.checks.trim`), and vital consumers that stand still while rows wait, holding back the queue's
trimming for every reader (`opsd.checks.vital`). Pure: a query's status in, findings out.

Keeping the rows, fastest first: register the query's consumer as vital (the Queue Agent never trims past a vital
consumer), raise the retention rule that holds them longest (`binding`) to what the backlog needs for twice the
alert's horizon, or read faster.
"""

from __future__ import annotations

import math
from shlex import quote

from opsd.config.thresholds import TRIM_ETA_SHORT_SECONDS
from opsd.doctor.report import Advice, FindingKind, Severity
from opsd.observe.status import QueryStatus
from opsd.results.trim import PartitionTrim, QueueTrim, TrimRule
from opsd.results.vital import VitalConsumerAudit
from streaming_core.auto_trim import AutoTrimConfig


def retention_advice(status: QueryStatus, cluster: str = "") -> list[Advice]:
    """The trim forecast's and the vital-consumer audit's findings of one query; `cluster`: the ` --cluster URI` of
    the advised commands (empty: the default cluster)."""
    found = [advice for queue, trim in (status.trim or {}).items() if (advice := _trim(queue, trim, cluster))]
    return found + [_stalled(audit, cluster) for audit in status.vital_consumers or () if audit.stalled]


def _trim(queue: str, trim: QueueTrim, cluster: str) -> Advice | None:
    parts = {p.partition: p for p in trim.partitions if p.at_risk}
    if not parts:
        return None
    soonest = min(parts, key=lambda n: math.inf if parts[n].eta_seconds is None else parts[n].eta_seconds)
    p, consumer = parts[soonest], trim.consumer
    eta = p.eta_seconds if p.eta_seconds is not None else math.inf
    when = "at the Queue Agent's next pass (seconds)" if eta == 0 else f"in about {_duration(eta)}"
    names = ", ".join(str(n) for n in sorted(parts))
    plural = "s" if len(parts) > 1 else ""
    what = (f"{queue}: the queue's auto-trim deletes rows the query has not read from partition{plural} {names} "
            f"{when}: {p.unread_rows} unread rows on partition {soonest}, held longest by "
            f"{p.binding or 'its rules'}")
    advice = [f"keep them now: register the consumer as vital (opsd consumer register {quote(queue)} "
              f"{quote(consumer)} --vital{cluster}; the Queue Agent never trims past a vital consumer)"]
    raise_rule = _raise(queue, trim.auto_trim, p)
    if raise_rule:
        advice.append(raise_rule)
    written, read = p.write_rows_per_second, p.read_rows_per_second
    if written is not None and read is not None and written >= read:
        advice.append(f"and read faster than rows arrive ({written:.0f} rows/s written, {read:.0f} read): raise "
                      "max_rows_per_partition in the tuning document or give the query more executors")
    return FindingKind.TRIM_SOON, Severity.ACTION, what, "; or ".join(advice)


def _raise(queue: str, config: AutoTrimConfig | None, p: PartitionTrim) -> str | None:
    """The retention rule to raise, to cover the unread rows plus twice the alert's horizon of the backlog's growth."""
    horizon = 2 * TRIM_ETA_SHORT_SECONDS
    written, read = p.write_rows_per_second, p.read_rows_per_second
    growth = max(0.0, written - read) if written is not None and read is not None else None
    if config is None:
        return None
    if p.binding is TrimRule.RETAINED_ROWS and config.retained_rows is not None:
        rows = p.unread_rows + (growth * horizon if growth is not None else config.retained_rows)
        return (f"keep more rows: yt set {queue}/@auto_trim_config/retained_rows {math.ceil(rows)} (now "
                f"{config.retained_rows}: the unread rows plus two hours of the backlog's growth)")
    if p.binding is TrimRule.RETAINED_LIFETIME and config.retained_lifetime_seconds is not None:
        millis = round((config.retained_lifetime_seconds + horizon) * 1000)
        return (f"keep rows longer: yt set {queue}/@auto_trim_config/retained_lifetime_duration {millis} (now "
                f"{round(config.retained_lifetime_seconds * 1000)} ms; two hours more)")
    return None


def _stalled(audit: VitalConsumerAudit, cluster: str) -> Advice:
    queue, consumer = audit.queue, audit.consumer
    whose = "the query's own consumer" if audit.own else "another job's consumer"
    what = (f"{queue}: vital consumer {consumer} ({whose}) has not moved for {_duration(audit.stalled_seconds)} "
            f"while {audit.waiting_rows} rows wait for it: the queue cannot be trimmed past it, for any reader")
    if audit.own:
        advice = ("the query no longer acknowledges what it reads: fix the query (its state and findings above); if "
                  f"it is retired for good, register its consumer again without --vital (opsd consumer register "
                  f"{quote(queue)} {quote(consumer)}{cluster}) so that trimming no longer waits for it")
    else:
        advice = (f"if the job reading {consumer} runs, fix that job; if it is gone for good, register the consumer "
                  f"again without --vital (opsd consumer register {quote(queue)} {quote(consumer)}{cluster}) so "
                  "that trimming no longer waits for it")
    return FindingKind.VITAL_CONSUMER_STALLED, Severity.ACTION, what, advice


def _duration(seconds: float) -> str:
    if seconds >= 3600:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 60:.0f} min" if seconds >= 60 else f"{seconds:.0f} s"
