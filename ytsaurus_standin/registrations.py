"""A proxy's cache of queue consumer registrations, as YTsaurus' registration manager keeps one per proxy.

A YTsaurus proxy answers `pull_consumer` and `list_queue_consumer_registrations` from a cache of the registration
table that it refreshes every `cache_refresh_period`, 10 s by default (`yt/yt/ytlib/queue_client/config.cpp`,
`registration_manager.cpp`): a pair registered a moment ago is "not registered" there (error 901) until the next
refresh. The stand-in makes that delay deterministic and strict: a pair is visible to a cache `delay_seconds` after
the cache first saw it in storage (at once for the pairs already there when the cache was made). Each proxy owns a
cache of its own (its clock injected), so a registration made through one proxy is seen by another only after that
proxy's own delay. An unregistered pair is gone at once, and a registration made again waits again.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable

from streaming_core.cluster.embedded import normalize_path

#: YTsaurus' default `cache_refresh_period` of the registration cache, in seconds.
REGISTRATION_DELAY_SECONDS = 10.0

Pair = tuple[str, str]


class RegistrationCache:
    """Which (queue, consumer) registrations one proxy sees. `registered()` lists the pairs in storage now; `clock`
    gives seconds (monotonic by default)."""

    def __init__(self, registered: Callable[[], Iterable[Pair]], *, delay_seconds: float = REGISTRATION_DELAY_SECONDS,
                 clock: Callable[[], float] = time.monotonic) -> None:
        if delay_seconds < 0:
            raise ValueError(f"delay_seconds must be >= 0, got {delay_seconds}")
        self.delay_seconds = delay_seconds
        self._registered = registered
        self._clock = clock
        self._lock = threading.Lock()
        self._first_seen: dict[Pair, float] = dict.fromkeys(registered(), float("-inf"))

    def observe(self) -> None:
        """Look at storage: pairs new to this cache start their delay now, pairs gone are forgotten."""
        now, current = self._clock(), set(self._registered())
        with self._lock:
            self._first_seen = {pair: self._first_seen.get(pair, now) for pair in current}

    def visible(self, queue: str, consumer: str) -> bool:
        """Whether this proxy answers as if the pair were registered."""
        self.observe()
        with self._lock:
            seen = self._first_seen.get((normalize_path(queue), normalize_path(consumer)))
        return seen is not None and self._clock() - seen >= self.delay_seconds
