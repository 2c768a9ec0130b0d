"""The scheduled desync check: for every query of the cycle's positions (`opsd.collect.positions`), evaluate ->
record, and where healing is enabled decide -> apply. Queries come from the config (pipelines opsd runs, `watch:`
entries) and, for a session opsd is attached to, from the progress events of its running queries.

One query's failure (an unreadable checkpoint, a missing consumer) is recorded as that query's problem and never
stops the others.
"""

from __future__ import annotations

import contextlib

import structlog

from opsd.checks.desync.apply import HealResult, apply
from opsd.checks.desync.decide import decide
from opsd.checks.desync.evaluate import evaluate
from opsd.collect.positions import PositionsCollector, QueryTarget, Reading, error_text
from opsd.observe.recorder import Recorder
from opsd.results.desync import HealOutcome, QueueDesync
from opsd.stores.history.apply import HistoryLog
from opsd.stores.history.decide import heal_entries
from streaming_core.checkpoint import newest_batch
from streaming_core.cluster import Cluster, connect

log = structlog.get_logger(__name__)

#: Outcomes that only mean "not now": a batch runs, or the running query will acknowledge the batch by itself.
WAITS = (HealOutcome.BATCH_RUNNING, HealOutcome.QUERY_BUSY)


class DesyncCheck:
    """Offset desync of every query whose positions are read, healed where its target says so (`opsd.checks.registry`
    builds it)."""

    name = "desync"

    def __init__(self, recorder: Recorder, positions: PositionsCollector, history: HistoryLog | None = None) -> None:
        self.recorder = recorder
        self.positions = positions
        self.history = history

    def run(self) -> list[QueueDesync | HealResult]:
        """Record every query's desync and heal where enabled; returns the desyncs and heal results."""
        return self.evaluate(self.positions.read())

    def evaluate(self, reading: Reading) -> list[QueueDesync | HealResult]:
        done: list[QueueDesync | HealResult] = []
        with contextlib.ExitStack() as stack:
            cluster: Cluster | None = None
            for queue in reading.queues:
                desync = evaluate(queue)
                self.recorder.record_desync(desync)
                done.append(desync)
                target = reading.targets.get(queue.query)
                if target is not None and target.heals and desync.partitions:
                    cluster = cluster or stack.enter_context(connect(self.positions.cluster_uri))
                    done.append(self.heal(cluster, desync, target))
        return done

    def heal(self, cluster: Cluster, desync: QueueDesync, target: QueryTarget) -> HealResult:
        """Decide and apply; counted when some partition is behind, unless it only has to wait for the query."""
        decision = decide(desync)
        try:
            result = apply(cluster, decision, lambda: newest_batch(target.checkpoint, cluster.uri))
        except Exception as e:  # isolation, as in collecting positions: the heal fails, the other queries' go on
            log.warning("desync_heal_failed", query=decision.query, queue=decision.queue, error=error_text(e))
            result = HealResult(decision, HealOutcome.FAILED)
        behind = any(p.difference_rows > 0 for p in desync.partitions)
        if behind and result.outcome not in WAITS:
            self.recorder.record_heal(desync.facts.query, desync.facts.queue, result.outcome, result.moves)
            if self.history is not None:
                self.history.record(cluster, heal_entries(desync, result.outcome, result.moves, self.recorder.clock()))
        return result
