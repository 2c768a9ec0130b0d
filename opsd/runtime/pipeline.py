"""The pipeline builder: one `PipelineConfig` into a running `StreamingQuery`, source -> transform -> sink.

Live tuning: a pipeline reading a `yt` queue gets one tuning document for its source and its `yt` sink
(`<consumer_path>_tuning` unless the options name one), so opsd tunes both values of a query in one place;
`PipelineConfig.source_tuning_path` / `sink_tuning_path` say which document each side reads.
"""

from __future__ import annotations

import importlib
import threading
from collections.abc import Callable
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.streaming import StreamingQuery

from opsd.config.models import PipelineConfig
from streaming_core.options import TUNING_PATH
from streaming_core.session import activate

#: The temporary view a pipeline's SQL transform reads (`SELECT ... FROM source`).
SOURCE_VIEW = "source"
_view_lock = threading.Lock()


def load_callable(ref: str) -> Callable[..., Any]:
    """`package.module:function` -> the function; errors name the reference."""
    module_name, _, attr = ref.partition(":")
    try:
        return getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as e:
        raise ValueError(f"cannot load callable {ref!r}: {e}") from None


def source_frame(spark: SparkSession, pipeline: PipelineConfig) -> DataFrame:
    source = pipeline.source
    options = {k: str(v) for k, v in source.options.items()}
    if pipeline.source_tuning_path():
        options.setdefault(TUNING_PATH, pipeline.source_tuning_path())
    reader = spark.readStream.format(source.format).options(**options)
    return reader.load(source.path) if source.path else reader.load()


def transform(spark: SparkSession, df: DataFrame, pipeline: PipelineConfig) -> DataFrame:
    spec = pipeline.transform
    if spec is None:
        return df
    if spec.callable:
        return load_callable(spec.callable)(df)
    with _view_lock:  # the view name is session-wide; the plan is bound as soon as sql() returns
        df.createOrReplaceTempView(SOURCE_VIEW)
        try:
            return spark.sql(spec.sql)
        finally:
            spark.catalog.dropTempView(SOURCE_VIEW)


def start_query(spark: SparkSession, pipeline: PipelineConfig) -> StreamingQuery:
    """Build and start the pipeline's query (named after the pipeline); callable from any thread."""
    activate(spark)
    df = transform(spark, source_frame(spark, pipeline), pipeline)
    sink = pipeline.sink
    writer = df.writeStream.queryName(pipeline.name).outputMode(pipeline.output_mode)
    writer = writer.trigger(**pipeline.trigger.spark_kwargs()) if pipeline.trigger.spark_kwargs() else writer
    if pipeline.checkpoint_location:
        writer = writer.option("checkpointLocation", pipeline.checkpoint_location)
    options = {k: str(v) for k, v in sink.options.items()}
    if sink.format == "foreachBatch":
        return writer.options(**options).foreachBatch(load_callable(sink.callable)).start()
    if pipeline.sink_tuning_path():
        options.setdefault(TUNING_PATH, pipeline.sink_tuning_path())
    if sink.path:
        options["path"] = sink.path
    return writer.format(sink.format).options(**options).start()
