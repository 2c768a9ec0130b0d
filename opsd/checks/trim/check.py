"""The scheduled trim forecast: collect (the cycle's positions and retention, the lag check's ages) -> evaluate (per
partition the time until unread rows are trimmed) -> decide (which need a person) -> record. It changes nothing.

It keeps each partition's recent samples between runs for the rates (`checks.lag_window_seconds`).
"""

from __future__ import annotations

from opsd.checks.trim.collect import collect
from opsd.checks.trim.decide import decide
from opsd.checks.trim.evaluate import evaluate
from opsd.checks.trim.facts import Sample, Window
from opsd.collect.positions import PositionsCollector, Reading
from opsd.config.models import ChecksSettings
from opsd.observe.recorder import Recorder
from opsd.results.lag import QueryLag
from opsd.results.trim import QueueTrim


class TrimCheck:
    """The trim forecast of every query whose positions are read (`opsd.checks.registry` builds it)."""

    name = "trim"

    def __init__(self, recorder: Recorder, positions: PositionsCollector, settings: ChecksSettings | None = None
                 ) -> None:
        self.recorder = recorder
        self.positions = positions
        self.window = Window((settings or ChecksSettings()).lag_window_seconds)

    def run(self) -> list[QueueTrim]:
        """Record every query's trim forecast; returns them."""
        return self.evaluate(self.positions.read())

    def evaluate(self, reading: Reading) -> list[QueueTrim]:
        found, seen = [], set()
        for facts in collect(reading, self._lag):
            samples = {}
            for p in facts.partitions:
                key = (facts.query, facts.queue, p.partition)
                self.window.add(key, Sample.of(facts.at, p))
                samples[p.partition] = self.window.samples(key)
                seen.add(key)
            trim = decide(evaluate(facts, samples))
            self.recorder.record_trim(trim)
            found.append(trim)
        self.window.keep_only(seen)
        return found

    def _lag(self, query: str) -> QueryLag | None:
        status = self.recorder.status.get(query)
        return status.lag if status else None
