"""Waiting for something that happens in another thread or process: `wait_until`, the one polling loop."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, TypeVar

from yt.wrapper.http_driver import HeavyProxyProvider

from streaming_core.cluster.ytsaurus import YtsaurusCluster
from streaming_core.cluster.ytsaurus.client import pinned_client

T = TypeVar("T")


def wait_until(condition: Callable[[], T], timeout: float, what: str | Callable[[], str], *,
               interval: float = 0.2) -> T:
    """Poll `condition` until it returns something true, and return that; fail naming `what` after `timeout`
    seconds (the machine may be busy). `what` may be a function, called at the timeout to show the latest state."""
    deadline = time.monotonic() + timeout
    while not (result := condition()):
        if time.monotonic() >= deadline:
            awaited = what if isinstance(what, str) else what()
            raise AssertionError(f"timed out after {timeout:.0f}s waiting for {awaited}")
        time.sleep(interval)
    return result


def registered_and_seen(cluster: Any, queue: str, consumer: str, **options: Any) -> None:
    """Register the consumer and wait until every proxy lists it: a YTsaurus proxy (and the stand-in's) sees a fresh
    registration only after its own registration cache's refresh (`Cluster.registration_visible_within_seconds`),
    each on a schedule of its own, so one that lists it says nothing of the others."""
    cluster.register_queue_consumer(queue, consumer, **options)
    seen_by_every_proxy(cluster, queue, consumer)


def seen_by_every_proxy(cluster: Any, queue: str, consumer: str | None = None) -> None:
    """Wait until every proxy lists a registration of `queue` (of `consumer`, if named)."""
    proxies = each_proxy(cluster)
    wait_until(lambda: all(p.list_queue_consumer_registrations(queue_path=queue, consumer_path=consumer)
                           for p in proxies),
               cluster.registration_visible_within_seconds + 5, f"the registration of {consumer or 'a consumer'} "
                                                                f"for {queue}")


def each_proxy(cluster: Any) -> list[Any]:
    """A client pinned to each heavy proxy `/hosts` lists, for a cluster of the YTsaurus backend; else the cluster."""
    if not isinstance(cluster, YtsaurusCluster):
        return [cluster]
    return [pinned_client(proxy, cluster._client_factory, cluster._token, cluster._config)
            for proxy in HeavyProxyProvider(cluster._client)._discover_heavy_proxies()]
