"""The scheduled lag check: collect (the cycle's positions, `$timestamp`) -> evaluate (unread rows, lag seconds,
smoothed rates, time to drain) -> record. It decides nothing and changes nothing.

It evaluates the same positions as the desync check and keeps each query's offset-to-time history between runs.
"""

from __future__ import annotations

import contextlib

from opsd.checks.lag.collect import Timestamps, collect
from opsd.checks.lag.evaluate import evaluate
from opsd.checks.lag.facts import Point
from opsd.checks.lag.history import History
from opsd.collect.positions import PositionsCollector, Reading
from opsd.config.models import ChecksSettings
from opsd.observe.recorder import Recorder
from opsd.results.lag import QueryLag
from streaming_core.cluster import connect


class LagCheck:
    """Backlog, lag and time to drain of every query whose positions are read (`opsd.checks.registry` builds it)."""

    name = "lag"

    def __init__(self, recorder: Recorder, positions: PositionsCollector, settings: ChecksSettings | None = None
                 ) -> None:
        settings = settings or ChecksSettings()
        self.recorder = recorder
        self.positions = positions
        self.window_seconds = settings.lag_window_seconds
        self.history = History(settings.lag_history_seconds, settings.lag_window_seconds)
        self.timestamps = Timestamps()

    def run(self) -> list[QueryLag]:
        """Record every query's lag; returns them."""
        return self.evaluate(self.positions.read())

    def evaluate(self, reading: Reading) -> list[QueryLag]:
        queues = reading.queues
        with contextlib.ExitStack() as stack:
            cluster = stack.enter_context(connect(self.positions.cluster_uri)) \
                if any(q.timestamped and q.partitions for q in queues) else None
            samples = collect(cluster, queues, reading.at, self.timestamps)
        found = []
        for sample in samples:
            lag = evaluate(sample, self.history.points(sample.query), self.window_seconds)
            self.history.add(sample.query, Point.of(sample))
            self.recorder.record_lag(lag)
            found.append(lag)
        self.history.forget_others({s.query for s in samples})
        return found

