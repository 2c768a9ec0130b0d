"""The scheduled lag check: collect (the desync facts' next rows and queue counters, `$timestamp`) -> evaluate
(unread rows, lag seconds, smoothed rates, time to drain) -> record. It decides nothing and changes nothing.

It samples the same queries as the desync check and keeps each one's offset-to-time history between runs.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable
from typing import Any

from opsd.checks.desync.check import ProgressSource, collect_queries
from opsd.checks.desync.collect import DesyncTarget
from opsd.checks.lag.collect import Timestamps, collect
from opsd.checks.lag.evaluate import QueryLag, evaluate
from opsd.checks.lag.facts import Point
from opsd.checks.lag.history import History
from opsd.config.models import ChecksSettings
from opsd.observe.recorder import Recorder
from streaming_core.cluster import connect


class LagCheck:
    """`scheduler.add_check("lag", LagCheck(...).run, interval)`."""

    def __init__(self, cluster_uri: str | None, recorder: Recorder, targets: Iterable[DesyncTarget] = (),
                 progress: ProgressSource | None = None, settings: ChecksSettings | None = None,
                 clock: Callable[[], float] = time.time) -> None:
        settings = settings or ChecksSettings()
        self.cluster_uri = cluster_uri
        self.recorder = recorder
        self.targets = list(targets)
        self.progress = progress
        self.window_seconds = settings.lag_window_seconds
        self.history = History(settings.lag_history_seconds, settings.lag_window_seconds)
        self.timestamps = Timestamps()
        self.clock = clock

    def run(self) -> list[QueryLag]:
        """Record every query's lag; returns them."""
        with connect(self.cluster_uri) as cluster:
            facts = [f for f, _ in collect_queries(cluster, self.targets, self.progress)]
            samples = collect(cluster, facts, self.clock(), self.timestamps)
        found = []
        for sample in samples:
            lag = evaluate(sample, self.history.points(sample.query), self.window_seconds)
            self.history.add(sample.query, Point.of(sample))
            self.recorder.record_lag(sample.query, view(lag))
            found.append(lag)
        self.history.forget_others({s.query for s in samples})
        return found


def view(lag: QueryLag) -> dict[str, Any]:
    """A query's lag as JSON-ready data (`+Inf` for a query that is not draining)."""
    drain = lag.time_to_drain_seconds
    queues: dict[str, dict[str, Any]] = {}
    for p in lag.partitions:
        queues.setdefault(p.queue, {})[str(p.partition)] = {"unread_rows": p.unread_rows,
                                                            "lag_seconds": p.lag_seconds}
    return {
        "backlog_rows": lag.backlog_rows,
        "time_to_drain_seconds": "+Inf" if drain is not None and math.isinf(drain) else drain,
        "input_rows_per_second": lag.input_rows_per_second,
        "processed_rows_per_second": lag.processed_rows_per_second,
        "queues": queues,
    }
