"""Collect the Queue Agent's attributes for the queues and consumers of one positions reading: each distinct queue's
`@queue_status` and `@queue_partitions` and each distinct consumer's `@queue_consumer_partitions`, read once per
cycle (at most three reads per queue-consumer pair, whatever the number of checks), as the cluster returns them.
A read that fails is logged and counts as not served (opsd's own measurements stand in): one queue's trouble never
stops the others'."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import structlog

from opsd.checks.queue_agent.facts import Served
from opsd.collect.positions import Reading, error_text
from streaming_core.cluster import Cluster, ClusterError
from streaming_core.cluster.base import QUEUE_CONSUMER_PARTITIONS, QUEUE_PARTITIONS, QUEUE_STATUS

log = structlog.get_logger(__name__)


def read(cluster: Cluster, path: str, name: str) -> Any:
    """One attribute, None when it is not served or cannot be read."""
    try:
        return cluster.queue_agent_attribute(path, name)
    except ClusterError as e:
        log.warning("queue_agent_read_failed", path=path, attribute=name, error=error_text(e))
        return None


def collect(cluster: Cluster, reading: Reading) -> Mapping[tuple[str, str], Served]:
    """`{(queue, consumer): Served}` for every queue of the reading whose partitions are known."""
    queues: dict[str, tuple[Any, Any]] = {}
    consumers: dict[str, Any] = {}
    found = {}
    for q in reading.queues:
        if not q.partitions or not q.consumer:
            continue
        if q.queue not in queues:
            queues[q.queue] = (read(cluster, q.queue, QUEUE_STATUS), read(cluster, q.queue, QUEUE_PARTITIONS))
        if q.consumer not in consumers:
            consumers[q.consumer] = read(cluster, q.consumer, QUEUE_CONSUMER_PARTITIONS)
        found[(q.queue, q.consumer)] = Served(f"{cluster.name}:{q.queue}", *queues[q.queue], consumers[q.consumer])
    return found
