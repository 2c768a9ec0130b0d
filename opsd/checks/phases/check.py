"""The scheduled batch phases check: collect (the pipelines' phases documents, their recent batches) -> evaluate
(`opsd.observe.phases`) -> record. It decides nothing and changes nothing.

A phases document keeps a pipeline's last `streaming_core.phases.SLOTS` batches: batches that ran between two runs of
the check beyond those are not measured (the metric counts measured batches)."""

from __future__ import annotations

from opsd.checks.phases.collect import collect, targets_for
from opsd.checks.phases.evaluate import PhaseEvaluation, evaluate
from opsd.config.models import OpsdConfig
from opsd.observe.recorder import Recorder
from streaming_core.cluster import connect


class PhasesCheck:
    """Where the config's pipelines' batches spend their time (`opsd.checks.registry` builds it)."""

    name = "phases"

    def __init__(self, recorder: Recorder, config: OpsdConfig) -> None:
        self.recorder = recorder
        self.cluster_uri = config.cluster
        self.targets = targets_for(config)

    def run(self) -> list[PhaseEvaluation]:
        with connect(self.cluster_uri) as cluster:
            facts = [collect(cluster, t, self.recorder.status) for t in self.targets]
        found = [evaluate(f) for f in facts]
        for evaluation in found:
            if evaluation.shares is not None:
                self.recorder.record_phases(evaluation.query, evaluation.shares, evaluation.new)
        return found
