"""Collect the tuning values in force: each pipeline's documents, read exactly as its source and sink read them.

The source's cap comes from the source's tuning document, the sink's rows per insert from the sink's (they
differ when the sink names its own `tuning_path`), each falling back to the pipeline's options and Spark conf
and clamped by the same `streaming_core.tuning` rules the connector uses.
"""

from __future__ import annotations

from dataclasses import dataclass

from opsd.config.models import PipelineConfig
from streaming_core.cluster import Cluster
from streaming_core.options import (
    configured_dyn_batch_size,
    configured_max_bytes_per_partition,
    configured_max_rows_per_partition,
)
from streaming_core.tuning import (
    Tuning,
    dyn_batch_size_in_force,
    load_tuning,
    max_bytes_in_force,
    max_rows_in_force,
)


@dataclass(frozen=True)
class TuningSources:
    """Where a pipeline's values come from: its documents, and the values it was started with."""

    query: str
    source_document: str | None
    sink_document: str | None
    max_rows_per_partition: int | None
    dyn_batch_size: int | None
    max_bytes_per_partition: int | None = None


@dataclass(frozen=True)
class TuningInForce:
    """The values the pipeline's source and sink use at their next batch (None: not a yt source / sink, or no cap)."""

    query: str
    max_rows_per_partition: int | None
    dyn_batch_size: int | None
    max_bytes_per_partition: int | None = None


def sources_for(pipeline: PipelineConfig, spark_conf: dict[str, str]) -> TuningSources:
    yt_source, yt_sink = pipeline.source.format == "yt", pipeline.sink.format == "yt"
    return TuningSources(
        query=pipeline.name,
        source_document=pipeline.source_tuning_path(),
        sink_document=pipeline.sink_tuning_path(),
        max_rows_per_partition=configured_max_rows_per_partition(pipeline.source.options) if yt_source else None,
        dyn_batch_size=configured_dyn_batch_size(pipeline.sink.options, spark_conf) if yt_sink else None,
        max_bytes_per_partition=configured_max_bytes_per_partition(pipeline.source.options) if yt_source else None,
    )


def in_force(cluster: Cluster, path: str | None) -> Tuning:
    """The document at `path` as the source and the sink use it: one that is not a tuning document is ignored by them
    (`read_tuning`), so it is not in force; one that cannot be read now raises `ClusterError`: a check does not judge
    or tune on values it could not read."""
    try:
        return load_tuning(cluster, path)
    except ValueError:
        return Tuning()


def collect(cluster: Cluster, sources: TuningSources) -> TuningInForce:
    """Read the pipeline's tuning documents (once when source and sink share one)."""
    source_doc = in_force(cluster, sources.source_document)
    sink_doc = source_doc if sources.sink_document == sources.source_document \
        else in_force(cluster, sources.sink_document)
    max_rows = max_rows_in_force(source_doc, sources.max_rows_per_partition)
    batch = None if sources.dyn_batch_size is None else dyn_batch_size_in_force(sink_doc, sources.dyn_batch_size)
    max_bytes = max_bytes_in_force(source_doc, sources.max_bytes_per_partition)
    return TuningInForce(sources.query, max_rows, batch, max_bytes)
