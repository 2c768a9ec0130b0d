"""The offset-to-time history the lag check samples: per query, points no closer than a spacing, for as long as the
history reaches. It gives the lag of queues without `$timestamp` and the rates behind time to drain.

The spacing keeps the history small whatever the check's interval (`MAX_POINTS` points per query at most).
"""

from __future__ import annotations

from collections import deque

from opsd.checks.lag.facts import Point

#: Points kept per query over the whole history.
MAX_POINTS = 240


class History:
    def __init__(self, history_seconds: float, window_seconds: float) -> None:
        self.history_seconds = history_seconds
        # At least a few points inside the rate window, and the whole history in MAX_POINTS.
        self.spacing = min(history_seconds / MAX_POINTS, window_seconds / 4)
        self._points: dict[str, deque[Point]] = {}

    def points(self, query: str) -> tuple[Point, ...]:
        return tuple(self._points.get(query, ()))

    def add(self, query: str, point: Point) -> None:
        """Keep `point` if it is at least the spacing after the newest kept one; forget points out of reach."""
        points = self._points.setdefault(query, deque())
        if points and point.at - points[-1].at < self.spacing:
            return
        points.append(point)
        while points and points[0].at < point.at - self.history_seconds:
            points.popleft()

    def forget_others(self, queries: set[str]) -> None:
        for query in set(self._points) - queries:
            del self._points[query]
