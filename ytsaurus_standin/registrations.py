"""Each proxy's cache of queue consumer registrations, as YTsaurus' registration manager keeps one per proxy.

A YTsaurus proxy answers `pull_consumer` and `list_queue_consumer_registrations` from a cache of the registration
table that it refreshes every `cache_refresh_period`, 10 s by default (`yt/yt/ytlib/queue_client/config.cpp`,
`registration_manager.cpp`), each proxy on its own schedule: a pair registered a moment ago is "not registered" there
(error 901) until that proxy's next refresh, so one proxy may see it while another does not yet. The stand-in makes
that delay deterministic and strict: a pair is visible to a proxy's cache `delay_seconds` after the cache first saw
it in storage (at once for the pairs already there when the cache was made), where each proxy's delay is its own
(`RegistrationCaches`: spread over the upper half of the refresh period, the slowest proxy at the whole period, so
that no proxy sees a pair right after its registration and every proxy sees it within the period). An unregistered
pair is gone at once, and a registration made again waits again.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable

from streaming_core.cluster.embedded import normalize_path

#: YTsaurus' default `cache_refresh_period` of the registration cache, in seconds.
REGISTRATION_DELAY_SECONDS = 10.0

Pair = tuple[str, str]
Clock = Callable[[], float]


class RegistrationCache:
    """Which (queue, consumer) registrations one proxy sees. `registered()` lists the pairs in storage now; `clock`
    gives seconds (monotonic by default)."""

    def __init__(self, registered: Callable[[], Iterable[Pair]], *, delay_seconds: float = REGISTRATION_DELAY_SECONDS,
                 clock: Clock = time.monotonic) -> None:
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


class RegistrationCaches:
    """One `RegistrationCache` per proxy (by address), each with a delay of its own: the `i`-th of `n` proxies sees a
    fresh pair `delay_seconds * (1 - i / (2 * n))` after it was registered. A request served by no proxy (`None`, a
    command called directly) is answered as the slowest proxy answers."""

    def __init__(self, registered: Callable[[], Iterable[Pair]], *, delay_seconds: float = REGISTRATION_DELAY_SECONDS,
                 clock: Clock = time.monotonic) -> None:
        self.delay_seconds = delay_seconds
        self._registered = registered
        self._clock = clock
        self._caches: dict[str | None, RegistrationCache] = {None: self._cache(delay_seconds)}

    def _cache(self, delay_seconds: float) -> RegistrationCache:
        return RegistrationCache(self._registered, delay_seconds=delay_seconds, clock=self._clock)

    def add_proxies(self, addresses: list[str]) -> None:
        """Give each proxy its cache, made now (it sees the pairs already registered at once)."""
        for i, address in enumerate(addresses):
            self._caches[address] = self._cache(self.delay_seconds * (1 - i / (2 * len(addresses))))

    def of(self, proxy: str | None) -> RegistrationCache:
        """The cache of the proxy at `proxy` (None: the slowest)."""
        return self._caches.get(proxy, self._caches[None])

    def delays(self) -> dict[str | None, float]:
        """Each proxy's delay, by address."""
        return {proxy: cache.delay_seconds for proxy, cache in self._caches.items()}

    def observe(self) -> None:
        """Every proxy's cache looks at storage (a registration changed): each starts its own delay now."""
        for cache in self._caches.values():
            cache.observe()
