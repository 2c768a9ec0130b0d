"""The trim forecast (`opsd.checks.trim`): per partition of a query's queue, the time until the queue's auto-trim
deletes rows the query has not read."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from opsd.results.values import parsed_fields
from streaming_core.auto_trim import AutoTrimConfig


class TrimOutlook(StrEnum):
    """Why a partition's trim forecast is what it is (`opsd.checks.trim.evaluate`)."""

    NO_AUTO_TRIM = "no_auto_trim"  # no @auto_trim_config, or enable is false: nothing trims on its own
    # the queue asks for trimming, but the cluster's Queue Agent has automatic trimming switched off
    # (`//sys/queue_agents/config`: queue_agent/controller/enable_automatic_trimming, off by default): nothing trims
    CLUSTER_TRIMMING_OFF = "cluster_trimming_off"
    NO_VITAL_CONSUMER = "no_vital_consumer"  # the Queue Agent trims only up to vital consumers: with none, not at all
    CONSUMER_VITAL = "consumer_vital"  # the query's own consumer is vital: trimming waits for it
    NOT_APPROACHING = "not_approaching"  # at the current rates the trim point never reaches the next row to read
    APPROACHING = "approaching"  # it reaches it in `eta_seconds`
    PENDING = "pending"  # it is past it already: the next pass of the Queue Agent deletes unread rows
    UNKNOWN = "unknown"  # rates (two readings) or the next row's age are not known yet


class TrimRule(StrEnum):
    """A rule the Queue Agent trims a queue by: its vital consumers, or a retention rule of `@auto_trim_config`
    (each value the attribute's key). The one that holds unread rows longest is the one to change to keep them
    (`PartitionTrim.binding`)."""

    VITAL_CONSUMERS = "vital_consumers"
    RETAINED_ROWS = "retained_rows"
    RETAINED_LIFETIME = "retained_lifetime_duration"


#: The rules in the order a tie goes to the later one (raising a retention rule keeps the rows).
TRIM_RULES: tuple[TrimRule, ...] = tuple(TrimRule)


@dataclass(frozen=True)
class PartitionTrim:
    """A partition's trim forecast: seconds until trimming deletes rows the query has not read (0: now; +Inf: not at
    the current rates; None: unknown), the rule that holds them longest (`binding`), the rates
    it was judged by, and whether it is below the level a person must act at (`at_risk`, set by the decide step)."""

    queue: str
    partition: int
    outlook: TrimOutlook
    eta_seconds: float | None
    unread_rows: int
    binding: TrimRule | None = None
    write_rows_per_second: float | None = None
    read_rows_per_second: float | None = None
    at_risk: bool = False

    def to_json(self) -> Mapping[str, Any]:
        return {"outlook": self.outlook, "eta_seconds": self.eta_seconds, "at_risk": self.at_risk,
                "unread_rows": self.unread_rows, "binding": self.binding,
                "write_rows_per_second": self.write_rows_per_second,
                "read_rows_per_second": self.read_rows_per_second}


@dataclass(frozen=True)
class QueueTrim:
    """A query's queue: its trimming config, its consumer and each partition's forecast; `problem` when the queue's
    retention could not be read."""

    query: str
    queue: str
    consumer: str
    auto_trim: AutoTrimConfig | None
    partitions: tuple[PartitionTrim, ...] = ()
    problem: str | None = None

    @classmethod
    def from_json(cls, doc: Mapping[str, Any], query: str, queue: str) -> QueueTrim:
        """The inverse of `to_json` (the query and the queue name its entry in `/status`)."""
        config = doc.get("auto_trim_config")
        partitions = tuple(parsed_fields(PartitionTrim, p, queue=queue, partition=int(n))
                           for n, p in (doc.get("partitions") or {}).items())
        return parsed_fields(cls, doc, query=query, queue=queue, partitions=partitions,
                             auto_trim=None if config is None else AutoTrimConfig.from_yt(queue, config))

    @property
    def eta_seconds(self) -> float | None:
        """The soonest partition's; None when none is known."""
        known = [p.eta_seconds for p in self.partitions if p.eta_seconds is not None]
        return min(known) if known else None

    def to_json(self) -> Mapping[str, Any]:
        return {"consumer": self.consumer, "auto_trim_config": self.auto_trim.to_yt() if self.auto_trim else None,
                "eta_seconds": self.eta_seconds, "problem": self.problem,
                "partitions": {p.partition: p for p in self.partitions}}
