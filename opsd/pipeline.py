"""Turn one `PipelineConfig` into a running `StreamingQuery`: source -> transform -> sink.

Live tuning: a pipeline reading a `yt` queue gets one tuning document for its source and its `yt` sink
(`<consumer_path>_tuning` unless the options name one), so opsd tunes both values of a query in one place.
"""

from __future__ import annotations

import importlib
import threading
from collections.abc import Callable
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.streaming import StreamingQuery

from opsd.config import PipelineConfig
from streaming_core.options import CONSUMER_PATH, TUNING_PATH
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


def tuning_path(pipeline: PipelineConfig) -> str | None:
    """The pipeline's tuning document, shared by its `yt` source and sink."""
    options = pipeline.source.options
    if pipeline.source.format != "yt":
        return None
    if options.get(TUNING_PATH):
        return str(options[TUNING_PATH])
    consumer = options.get(CONSUMER_PATH)
    return f"{consumer}_tuning" if consumer else None


def source_frame(spark: SparkSession, pipeline: PipelineConfig) -> DataFrame:
    source = pipeline.source
    options = {k: str(v) for k, v in source.options.items()}
    if tuning_path(pipeline):
        options.setdefault(TUNING_PATH, tuning_path(pipeline))
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
        result = spark.sql(spec.sql)
        spark.catalog.dropTempView(SOURCE_VIEW)
    return result


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
    if sink.format == "yt" and tuning_path(pipeline):
        options.setdefault(TUNING_PATH, tuning_path(pipeline))
    if sink.path:
        options["path"] = sink.path
    return writer.format(sink.format).options(**options).start()
