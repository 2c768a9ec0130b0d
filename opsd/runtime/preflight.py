"""Pre-flight: what is wrong with a pipeline that can be known before its query starts.

`opsd run --check CONFIG` runs it for every pipeline and starts nothing; `opsd run` runs it at start and does not
start a pipeline that fails it (that pipeline is reported failed permanently: a restart could not help). Checked:
the `yt` source's options, its queue and the consumer's registration; a checkpoint location; the transform and
`foreachBatch` functions can be imported; the `yt` sink's options, that its table exists, and that the transform's
output fits it (the one check that needs Spark: the query is built, not started).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from pyspark.errors import PySparkException
from pyspark.sql import SparkSession

from opsd.config.models import OpsdConfig, PipelineConfig
from opsd.runtime.pipeline import load_callable, source_frame, transform
from streaming_core.cluster import ClusterError, connect, resolve_uri
from streaming_core.cluster.base import ORDERED, SORTED, require_kind
from streaming_core.options import CONF_CLUSTER, PATH, SinkOptions, SourceOptions
from streaming_core.sink import plan_sink
from streaming_core.source import check_readable

#: Sinks that need no checkpoint to resume: they keep nothing across restarts anyway.
_EPHEMERAL_SINKS = ("console", "memory")


@dataclass(frozen=True)
class Problem:
    """One thing wrong with a pipeline; `part` is source, transform, sink or checkpoint."""

    pipeline: str
    part: str
    message: str

    def __str__(self) -> str:
        return f"pipeline '{self.pipeline}': {self.part}: {self.message}"


def preflight(config: OpsdConfig, spark: SparkSession | None = None) -> dict[str, list[Problem]]:
    """Every pipeline's problems (an empty list: ready to start). Without `spark` the schema fit is not checked."""
    return {p.name: check_pipeline(config, p, spark) for p in config.pipelines}


def check_pipeline(config: OpsdConfig, pipeline: PipelineConfig, spark: SparkSession | None) -> list[Problem]:
    session = {**config.spark.conf, CONF_CLUSTER: resolve_uri(config.cluster)}
    problems: list[Problem] = []

    def check(part: str, step: Callable[[], object]) -> bool:
        try:
            step()
        except (ValueError, ClusterError, PySparkException) as e:
            problems.append(Problem(pipeline.name, part, str(e).splitlines()[0] if str(e) else type(e).__name__))
            return False
        return True

    source, sink = pipeline.source, pipeline.sink
    if source.format == "yt":
        check("source", lambda: _check_yt_source(session, pipeline))
    if not pipeline.checkpoint_location and sink.format not in _EPHEMERAL_SINKS:
        problems.append(Problem(pipeline.name, "checkpoint", "no checkpoint_location: the query could not resume "
                                "where it stopped after a restart (set checkpoint_location, e.g. yt:///...)"))
    if pipeline.transform and pipeline.transform.callable:
        check("transform", lambda: load_callable(pipeline.transform.callable))
    if sink.format == "foreachBatch":
        check("sink", lambda: load_callable(sink.callable))
    sink_options: list[SinkOptions] = []
    if sink.format == "yt":
        check("sink", lambda: sink_options.append(_check_yt_sink(session, pipeline)))
    if spark is not None and sink_options and not problems:
        check("sink", lambda: plan_sink(sink_options[0], transform(spark, source_frame(spark, pipeline),
                                                                   pipeline).schema,
                                        overwrite=pipeline.output_mode == "complete"))
    return problems


def _check_yt_source(session: dict[str, str], pipeline: PipelineConfig) -> None:
    options = SourceOptions.parse({**pipeline.source.options, PATH: pipeline.source.path}, session, streaming=True)
    with connect(options.cluster) as cluster:
        check_readable(cluster, options, streaming=True)


def _check_yt_sink(session: dict[str, str], pipeline: PipelineConfig) -> SinkOptions:
    options = SinkOptions.parse(pipeline.yt_sink_options(), session)
    with connect(options.cluster) as cluster:
        require_kind(cluster, options.path, ORDERED, SORTED)
    return options
