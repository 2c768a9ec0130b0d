"""The scheduled tuning check: collect every pipeline's values in force and record them (no decisions here:
choosing new values is the autotuner's job)."""

from __future__ import annotations

from opsd.checks.tuning.collect import collect, sources_for
from opsd.config.models import OpsdConfig
from opsd.observe.recorder import Recorder
from streaming_core.cluster import connect


class TuningCheck:
    """The values in force of the config's pipelines (`opsd.checks.registry` builds it)."""

    name = "tuning"

    def __init__(self, recorder: Recorder, config: OpsdConfig, cluster_uri: str | None = None) -> None:
        self.cluster_uri = cluster_uri or config.cluster
        self.recorder = recorder
        self.sources = [sources_for(p, dict(config.spark.conf)) for p in config.pipelines]

    def run(self) -> dict[str, tuple[int | None, int | None]]:
        """Record the values in force for every pipeline; returns `{query: (max_rows, dyn_batch_size)}`."""
        with connect(self.cluster_uri) as cluster:
            found = [collect(cluster, s) for s in self.sources]
        for values in found:
            self.recorder.record_tuning(values.query, max_rows_per_partition=values.max_rows_per_partition,
                                        max_bytes_per_partition=values.max_bytes_per_partition,
                                        dyn_batch_size=values.dyn_batch_size)
        return {v.query: (v.max_rows_per_partition, v.dyn_batch_size) for v in found}
