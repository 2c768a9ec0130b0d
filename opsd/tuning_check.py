"""The tuning values in force for each pipeline, as facts for `/status` and the `opsd_tuning_*` gauges.

Collecting only: it reads each pipeline's tuning document (see `streaming_core.tuning`) and falls back
to the values the pipeline was started with, exactly as the source and sink do. Deciding new values is
the autotuner's job, not this check's.
"""

from __future__ import annotations

from dataclasses import dataclass

from opsd.config import OpsdConfig, PipelineConfig
from opsd.pipeline import tuning_path
from opsd.recorder import Recorder
from streaming_core.cluster import connect
from streaming_core.options import (
    CONF_DYN_BATCH_SIZE,
    DEFAULT_DYN_BATCH_SIZE,
    DYN_BATCH_SIZE,
    MAX_ROWS_PER_PARTITION,
)
from streaming_core.tuning import Tuning, read_tuning


@dataclass(frozen=True)
class TuningFallback:
    """What a pipeline uses when its tuning document does not say: its options and Spark conf."""

    query: str
    document: str | None
    max_rows_per_partition: int | None
    dyn_batch_size: int | None

    def in_force(self, tuning: Tuning) -> tuple[int | None, int | None]:
        return (tuning.max_rows_per_partition or self.max_rows_per_partition,
                tuning.dyn_batch_size or self.dyn_batch_size)


def fallback_for(pipeline: PipelineConfig, spark_conf: dict[str, str]) -> TuningFallback:
    max_rows = pipeline.source.options.get(MAX_ROWS_PER_PARTITION) if pipeline.source.format == "yt" else None
    batch = None
    if pipeline.sink.format == "yt":
        batch = pipeline.sink.options.get(DYN_BATCH_SIZE) or spark_conf.get(CONF_DYN_BATCH_SIZE) \
            or DEFAULT_DYN_BATCH_SIZE
    return TuningFallback(pipeline.name, tuning_path(pipeline), int(max_rows) if max_rows else None,
                          int(batch) if batch else None)


class TuningCheck:
    """The scheduled check: `scheduler.add_check("tuning", TuningCheck(config, recorder).run, interval)`."""

    def __init__(self, config: OpsdConfig, recorder: Recorder) -> None:
        self.cluster_uri = config.cluster
        self.recorder = recorder
        self.fallbacks = [fallback_for(p, dict(config.spark.conf)) for p in config.pipelines]

    def run(self) -> dict[str, tuple[int | None, int | None]]:
        """Record the values in force for every pipeline; returns them for logs and tests."""
        found = {}
        with connect(self.cluster_uri) as cluster:
            for fallback in self.fallbacks:
                max_rows, batch = fallback.in_force(read_tuning(cluster, fallback.document))
                self.recorder.record_tuning(fallback.query, max_rows_per_partition=max_rows, dyn_batch_size=batch)
                found[fallback.query] = (max_rows, batch)
        return found
