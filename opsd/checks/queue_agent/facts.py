"""What the Queue Agent check collects about one queue and its consumer, as plain data: the agent's attributes as
the cluster returned them. Built by `collect`, read by `evaluate`; tests build them by hand."""

from __future__ import annotations

from dataclasses import dataclass

from opsd.results.values import JsonValue


@dataclass(frozen=True)
class Served:
    """The Queue Agent's attributes of one queue and its consumer (None: not served), and the queue's reference as
    the consumer's partitions are keyed by (`cluster:path`)."""

    reference: str
    queue_status: JsonValue = None
    queue_partitions: JsonValue = None
    consumer_partitions: JsonValue = None
