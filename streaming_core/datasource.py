"""The `yt` data source: `spark.read[Stream].format("yt")` and `df.write[Stream].format("yt")`.

`df.write` applies Spark's save modes to static tables (`save_modes`); SPYT's `spark.read.yt(...)` /
`df.write.yt(...)` shorthands are installed by `register` (`shorthands`), with the guard that keeps a failing
`foreachBatch` function's text short enough for Spark to stop the query cleanly (`foreach_batch`).

The sink's modules (`sink`, `save_modes`) are imported by the writer methods that use them: Spark starts a
fresh Python process for every streaming query's source (the streaming source runner), which imports this
module, and a reader has no use for them (~30 ms of every query start).

`register(spark)` makes the format known to a session. Readers and writers run in processes that cannot
see the session's conf, so `register` snapshots the `spark.yt.*` keys the source and sink need into a
subclass that Spark ships to them (by value, with cloudpickle). Register again after changing them.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any, ClassVar

from pyspark.sql import SparkSession
from pyspark.sql.datasource import DataSource, DataSourceWriter
from pyspark.sql.types import StructType

from .cluster import connect
from .cluster.errors import AccessDeniedError
from .foreach_batch import install_foreach_batch_guard
from .log import redact_foreign_loggers
from .options import (
    FORMAT,
    PRODUCER_PATH,
    SESSION_CONF_KEYS,
    SRC_ROW_INDEX,
    SRC_TABLET_INDEX,
    SinkOptions,
    SourceOptions,
)
from .shorthands import install_shorthands
from .source import YtBatchReader, YtStreamReader, check_readable
from .types import read_schema, spark_schema

if TYPE_CHECKING:
    from .sink import YtStreamWriter

__all__ = ["FORMAT", "YtDataSource", "register"]


class YtDataSource(DataSource):
    """PySpark data source over a YTsaurus (or embedded) cluster; see the module docstring."""

    #: The `spark.yt.*` conf of the session that registered this class (see `register`).
    session_conf: ClassVar[dict[str, str]] = {}

    @classmethod
    def name(cls) -> str:
        return FORMAT

    def _source_options(self, *, streaming: bool) -> SourceOptions:
        return SourceOptions.parse(dict(self.options), self.session_conf, streaming=streaming)

    def schema(self) -> StructType:
        """Called at `load()`: the table's schema, after checking options, table kind and consumer."""
        streaming = bool(self.options.get("consumer_path"))
        options = self._source_options(streaming=streaming)
        with connect(options.cluster) as cluster:
            check_readable(cluster, options, streaming=streaming)
            try:
                table_schema = cluster.get_schema(options.path)
            except AccessDeniedError as e:
                if not streaming:
                    raise
                raise AccessDeniedError(f"{e}. A stream granted the queue through its consumer only (read on the "
                                        f"consumer, no right on the queue) names the columns it reads: "
                                        f"spark.readStream.format('yt').schema('data string, n long')") from None
            arrow = read_schema(table_schema, type_v3=options.parsing_type_v3)
        schema = spark_schema(arrow)
        if options.include_service_columns:
            service = StructType().add(SRC_TABLET_INDEX, "long", False).add(SRC_ROW_INDEX, "long", False)
            schema = StructType(service.fields + schema.fields)
        return schema

    def reader(self, schema: StructType) -> YtBatchReader:
        return YtBatchReader(self._source_options(streaming=False), schema)

    def streamReader(self, schema: StructType) -> YtStreamReader:
        options = self._source_options(streaming=True)
        with connect(options.cluster) as cluster:
            check_readable(cluster, options, streaming=True)
        return YtStreamReader(options, schema)

    def _sink_options(self) -> SinkOptions:
        return SinkOptions.parse(dict(self.options), self.session_conf)

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        """`df.write.format("yt")`: the save mode applied (see `save_modes`), then plain inserts or appends
        (a batch write has no batch id to commit once)."""
        from .save_modes import batch_writer  # writer-only modules: see the module docstring

        options = dataclasses.replace(self._sink_options(), transactional=False)
        if options.producer_path:
            raise ValueError(f"option {PRODUCER_PATH!r} is for streams (writeStream): a batch write has no batch id "
                             f"to number its rows by; a batch write into a dynamic table is all or nothing already")
        return batch_writer(options, schema, overwrite=overwrite)

    def streamWriter(self, schema: StructType, overwrite: bool) -> YtStreamWriter:
        """Called when a streaming query starts; `overwrite` is set for output mode 'complete'."""
        from .sink import YtStreamWriter, plan_sink

        return YtStreamWriter(plan_sink(self._sink_options(), schema, overwrite=overwrite))


def register(spark: SparkSession) -> type[YtDataSource]:
    """Register the `yt` format with `spark`, carrying the session's `spark.yt.*` conf to readers/writers,
    install SPYT's shorthands (`spark.read.yt(...)`, `df.write.yt(...)`, see `shorthands`) and bound the text of
    a failing `foreachBatch` function, which Spark cannot read past ~2,000 characters while it stops a query
    (`foreach_batch`); py4j's and ytsaurus-client's log records leave redacted (`log.redact_foreign_loggers`)."""
    install_shorthands()
    install_foreach_batch_guard()
    redact_foreign_loggers()
    conf: dict[str, Any] = {}
    for key in SESSION_CONF_KEYS:
        value = spark.conf.get(key, None)
        if value is not None:
            conf[key] = value
    source = type("YtDataSourceForSession", (YtDataSource,), {"session_conf": conf, "__module__": __name__})
    spark.dataSource.register(source)
    return source
