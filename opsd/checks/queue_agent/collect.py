"""Collect the Queue Agent's attributes for the queues and consumers of one positions reading: each distinct queue's
`@queue_status` and `@queue_partitions` and each distinct consumer's `@queue_consumer_partitions`, read once per
cycle (at most three reads per queue-consumer pair, whatever the number of checks), as the cluster returns them."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from opsd.checks.positions.collect import Reading
from opsd.checks.queue_agent.facts import Served
from streaming_core.cluster import Cluster
from streaming_core.cluster.base import QUEUE_CONSUMER_PARTITIONS, QUEUE_PARTITIONS, QUEUE_STATUS


def collect(cluster: Cluster, reading: Reading) -> Mapping[tuple[str, str], Served]:
    """`{(queue, consumer): Served}` for every queue of the reading whose partitions are known."""
    queues: dict[str, tuple[Any, Any]] = {}
    consumers: dict[str, Any] = {}
    found = {}
    for q in reading.queues:
        if not q.partitions or not q.consumer:
            continue
        if q.queue not in queues:
            queues[q.queue] = (cluster.queue_agent_attribute(q.queue, QUEUE_STATUS),
                               cluster.queue_agent_attribute(q.queue, QUEUE_PARTITIONS))
        if q.consumer not in consumers:
            consumers[q.consumer] = cluster.queue_agent_attribute(q.consumer, QUEUE_CONSUMER_PARTITIONS)
        found[(q.queue, q.consumer)] = Served(f"{cluster.name}:{q.queue}", *queues[q.queue], consumers[q.consumer])
    return found
