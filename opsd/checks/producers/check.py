"""The scheduled producers check: collect (the query's sessions, its sink's last write statistics, the recorded
fences) -> evaluate (what changed, sessions ahead of the query) -> decide (the state) -> record. It changes nothing:
removing sessions is a person's call (`opsd producer remove-sessions`, the doctor's advice)."""

from __future__ import annotations

import time
from collections.abc import Callable

from opsd.checks.producers.collect import collect, targets_for
from opsd.checks.producers.decide import decide
from opsd.checks.producers.evaluate import evaluate
from opsd.config.models import OpsdConfig
from opsd.observe.recorder import Recorder
from opsd.results.producers import ProducerReport
from streaming_core.cluster import connect


class ProducersCheck:
    """The producers of the config's pipelines that write through one (`opsd.checks.registry` builds it)."""

    name = "producers"

    def __init__(self, recorder: Recorder, config: OpsdConfig, clock: Callable[[], float] = time.time) -> None:
        self.recorder = recorder
        self.targets = targets_for(config)
        self.clock = clock

    def run(self) -> list[ProducerReport]:
        reports = []
        for target in self.targets:
            with connect(target.cluster) as cluster:
                evaluation = evaluate(collect(cluster, target, self.recorder.status, self.clock()))
            report = decide(evaluation)
            self.recorder.record_producers(report, evaluation.new, evaluation.new_fences)
            reports.append(report)
        return reports
