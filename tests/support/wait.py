"""Waiting for something that happens in another thread or process: `wait_until`, the one polling loop."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, TypeVar

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
    """Register the consumer and wait until the cluster lists it: a YTsaurus proxy (and the stand-in) sees a fresh
    registration only after its registration cache's refresh (`Cluster.registration_visible_within_seconds`)."""
    cluster.register_queue_consumer(queue, consumer, **options)
    wait_until(lambda: cluster.list_queue_consumer_registrations(queue_path=queue, consumer_path=consumer),
               cluster.registration_visible_within_seconds + 5, f"the registration of {consumer} for {queue}")
