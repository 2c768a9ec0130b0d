"""The Spark conf opsd starts sessions with: the seeds' best practices, overridden by the config's own."""

from __future__ import annotations

from opsd.config.models import OpsdConfig


def spark_defaults(config: OpsdConfig) -> dict[str, str]:
    """The seeds' best practices for streaming, overridden by the user's ``spark.conf``.

    Stateless pipelines need only the last couple of batches' metadata, so retaining 2 (instead of
    100) keeps checkpoints small; batch AQE re-plans every micro-batch and is turned off in favour
    of streaming adaptive execution. The seeds also set `spark.streaming.stopGracefullyOnShutdown`; it is a
    DStreams setting that Structured Streaming ignores, kept so sessions match the seeds. What stops a query
    gracefully is opsd itself: on SIGTERM it lets the running micro-batch finish (for at most
    `SparkSettings.graceful_timeout_seconds`), then stops the query (`opsd.runtime.runner`).
    """
    defaults = {
        "spark.sql.adaptive.enabled": "false",
        "spark.sql.streaming.adaptiveExecution.enabled": "true",
        "spark.streaming.stopGracefullyOnShutdown": "true",
    }
    if not any(p.stateful for p in config.pipelines):
        defaults["spark.sql.streaming.minBatchesToRetain"] = "2"
    return {**defaults, **config.spark.conf}
