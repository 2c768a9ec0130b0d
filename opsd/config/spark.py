"""The Spark conf opsd starts sessions with: the seeds' best practices, overridden by the config's own."""

from __future__ import annotations

import sys

from opsd.config.models import OpsdConfig
from opsd.telemetry.logs import spark_java_options

#: Where the driver JVM's options go; opsd adds the ones that shape Spark's logs (`opsd.telemetry.logs`).
JAVA_OPTIONS = "spark.driver.extraJavaOptions"

#: The Spark UI and its REST API on, with the memory peaks the OOM check reads: per stage, including the process
#: tree (Python workers), polled every 200 ms (the default, on heartbeats only, misses short peaks).
MEMORY_METRICS_CONF = {
    "spark.ui.enabled": "true",
    "spark.executor.processTreeMetrics.enabled": "true",
    "spark.executor.metrics.pollingInterval": "200ms",
    "spark.eventLog.logStageExecutorMetrics": "true",
}


def spark_defaults(config: OpsdConfig) -> dict[str, str]:
    """The seeds' best practices for streaming, overridden by the user's ``spark.conf``.

    Stateless pipelines need only the last couple of batches' metadata, so retaining 2 (instead of
    100) keeps checkpoints small; batch AQE re-plans every micro-batch and is turned off in favour
    of streaming adaptive execution. The seeds also set `spark.streaming.stopGracefullyOnShutdown`; it is a
    DStreams setting that Structured Streaming ignores, kept so sessions match the seeds. What stops a query
    gracefully is opsd itself: on SIGTERM it lets the running micro-batch finish (for at most
    `SparkSettings.graceful_timeout_seconds`), then stops the query (`opsd.runtime.runner`). opsd's sessions
    keep the Spark UI on (`build_session` turns it off for others): its REST API serves the memory peaks.

    Spark's console progress bar is off (it would cut into opsd's log lines and the demo's view), and the driver
    JVM logs in opsd's format at `logging.spark_level` (`opsd.telemetry.logs.spark_java_options`).
    """
    defaults = {
        **MEMORY_METRICS_CONF,
        "spark.ui.port": str(config.spark.ui_port),
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.adaptive.enabled": "false",
        "spark.sql.streaming.adaptiveExecution.enabled": "true",
        "spark.streaming.stopGracefullyOnShutdown": "true",
    }
    if not any(p.stateful for p in config.pipelines):
        defaults["spark.sql.streaming.minBatchesToRetain"] = "2"
    conf = {**defaults, **config.spark.conf}
    # The user's own JVM options come after opsd's, so that a -D of theirs wins.
    conf[JAVA_OPTIONS] = " ".join(filter(None, [spark_java_options(
        config.logging.spark_level, config.logging.json_lines(sys.stderr)), config.spark.conf.get(JAVA_OPTIONS)]))
    return conf
