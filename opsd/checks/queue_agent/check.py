"""The scheduled Queue Agent check: for every queue of the cycle's positions (`opsd.collect.positions`), collect the
Queue Agent's attributes -> evaluate (falling back to opsd's own measurements) -> record. It only reads.

A failure to read the attributes is logged and leaves opsd's own measurements in force; it never stops the check of
the other queues' signals.
"""

from __future__ import annotations

import structlog

from opsd.checks.queue_agent.collect import collect
from opsd.checks.queue_agent.evaluate import evaluate
from opsd.checks.queue_agent.facts import Served
from opsd.collect.positions import PositionsCollector, Reading, error_text
from opsd.observe.recorder import Recorder
from opsd.results.queue_agent import QueueSignals
from streaming_core.cluster import ClusterError, connect

log = structlog.get_logger(__name__)


class QueueAgentCheck:
    """Queue Agent signals of every query whose positions are read (`opsd.checks.registry` builds it)."""

    name = "queue_agent"

    def __init__(self, recorder: Recorder, positions: PositionsCollector) -> None:
        self.recorder = recorder
        self.positions = positions
        self._row_counts: dict[tuple[str, int], tuple[float, int]] = {}

    def run(self) -> list[QueueSignals]:
        return self.evaluate(self.positions.read())

    def evaluate(self, reading: Reading) -> list[QueueSignals]:
        queues = [q for q in reading.queues if q.partitions and q.consumer]
        if not queues:
            return []
        try:
            with connect(self.positions.cluster_uri) as cluster:
                served = collect(cluster, reading)
        except (ClusterError, OSError) as e:
            log.warning("queue_agent_collect_failed", error=error_text(e))
            served = {}
        found = []
        for q in queues:
            status = self.recorder.status.get(q.query)
            signals = evaluate(q, served.get((q.queue, q.consumer)) or Served(""), self._row_counts, reading.at,
                               status.lag if status else None)
            self.recorder.record_queue_signals(signals)
            found.append(signals)
        self._row_counts = {(q.queue, p.partition): (reading.at, p.row_count) for q in queues for p in q.partitions}
        return found
