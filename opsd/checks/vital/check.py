"""The scheduled vital-consumer audit: collect (the cycle's positions and retention) -> evaluate (rows waiting, time
standing still) -> decide (which need a person) -> record, under every query that reads the queue (a vital consumer of
another job holds back the queue's trimming for it too). It changes nothing.

It keeps each consumer's last audit between runs: the time a consumer stands still counts from when opsd first saw
it so.
"""

from __future__ import annotations

from dataclasses import replace

from opsd.checks.vital.collect import collect
from opsd.checks.vital.decide import decide
from opsd.checks.vital.evaluate import evaluate
from opsd.collect.positions import PositionsCollector, Reading
from opsd.observe.recorder import Recorder
from opsd.results.vital import VitalConsumerAudit


class VitalConsumerCheck:
    """The vital consumers of every queue whose positions are read (`opsd.checks.registry` builds it)."""

    name = "vital_consumers"

    def __init__(self, recorder: Recorder, positions: PositionsCollector) -> None:
        self.recorder = recorder
        self.positions = positions
        self._last: dict[tuple[str, str], VitalConsumerAudit] = {}

    def run(self) -> list[VitalConsumerAudit]:
        """Record every vital consumer's audit under the queries reading its queue; returns the audits."""
        return self.evaluate(self.positions.read())

    def evaluate(self, reading: Reading) -> list[VitalConsumerAudit]:
        audits, by_query = [], {q.query: [] for q in reading.queries}
        last = {}
        for facts in collect(reading):
            key = (facts.queue, facts.consumer)
            audit = last[key] = decide(evaluate(facts, self._last.get(key)))
            audits.append(audit)
            for query in facts.readers:
                by_query[query].append(replace(audit, own=facts.own(query)))
        self._last = last
        for query, found in by_query.items():
            self.recorder.record_vital_consumers(query, tuple(found))
        return audits
