"""The Spark conf opsd starts sessions with: the seeds' best practices, overridden by the config's own."""

from __future__ import annotations

import sys
from collections.abc import Mapping

from opsd.config.models import OpsdConfig
from opsd.telemetry.logs import spark_java_options

#: Where the driver JVM's options go; opsd adds the ones that shape Spark's logs (`opsd.telemetry.logs`).
JAVA_OPTIONS = "spark.driver.extraJavaOptions"

#: The Spark UI and its REST API on (the Structured Streaming tab; the memory peaks the OOM check reads), without
#: the buttons that kill jobs and stages: whoever reaches the UI may read it, not stop the pipelines.
UI_CONF = {
    "spark.ui.enabled": "true",
    "spark.ui.killEnabled": "false",
}
#: Spark binds its UI to `$SPARK_LOCAL_IP`, else to every interface (`org.apache.spark.ui.WebUI.bind`).
LOCAL_IP_ENV = "SPARK_LOCAL_IP"
LOOPBACK = "127.0.0.1"
EVERY_INTERFACE = ("0.0.0.0", "::")
#: With a local master every Spark process is on this host: the driver's RPC endpoint and block manager (which have no
#: authentication unless `spark.authenticate`) stay on loopback whatever the UI binds to (`SPARK_LOCAL_IP`, which
#: would otherwise move them too).
LOCAL_MASTER_DRIVER_CONF = {
    "spark.driver.bindAddress": LOOPBACK,
    "spark.driver.host": LOOPBACK,
}
#: The UI on (`UI_CONF`) with the memory peaks the OOM check reads from its REST API: per stage, including the process
#: tree (Python workers), polled every 200 ms (the default, on heartbeats only, misses short peaks).
MEMORY_METRICS_CONF = {
    **UI_CONF,
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
    keep the Spark UI on (`build_session` turns it off for others): its REST API serves the memory peaks. Its kill
    buttons are off, and where it binds is `spark_environment`'s; with a local master the driver's RPC and block
    manager stay on loopback whatever the UI binds to (`LOCAL_MASTER_DRIVER_CONF`).

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
    if is_local_master(config.spark.master):
        defaults |= LOCAL_MASTER_DRIVER_CONF
    conf = {**defaults, **config.spark.conf}
    # The user's own JVM options come after opsd's, so that a -D of theirs wins.
    conf[JAVA_OPTIONS] = " ".join(filter(None, [spark_java_options(
        config.logging.spark_level, config.logging.json_lines(sys.stderr)), config.spark.conf.get(JAVA_OPTIONS)]))
    return conf


def spark_environment(config: OpsdConfig, environ: Mapping[str, str]) -> dict[str, str | None]:
    """The environment variables to set (None: to remove) before the driver JVM starts: where the Spark UI binds.

    Spark binds its UI to `$SPARK_LOCAL_IP` (which also becomes the driver's address), else to every interface.
    `spark.ui_host` chooses; without it a local master (`local[*]`, `local-cluster[...]`: every process on this
    host) binds to loopback, unless `$SPARK_LOCAL_IP` is set already, and another master keeps Spark's default
    (its executors must reach the driver; set `ui_host` and `spark.driver.host` to restrict it).
    """
    host = config.spark.ui_host
    if host is None:
        local = is_local_master(config.spark.master)
        return {LOCAL_IP_ENV: LOOPBACK} if local and LOCAL_IP_ENV not in environ else {}
    return {LOCAL_IP_ENV: None if host in EVERY_INTERFACE else host}


def is_local_master(master: str) -> bool:
    """`local`, `local[N]`, `local-cluster[...]`: every Spark process of the session runs on this host."""
    return master.startswith("local")
