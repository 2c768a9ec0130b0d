"""`opsd.attach(spark)`: opsd's monitoring for any Spark session with one call, and `detach()` to undo it.

Wires the pieces together: metrics (one registry), the status store, the recorder, the listener that
never blocks Spark, the HTTP endpoint and the scheduled checks, built by `opsd.checks.registry` (for a session alone:
the stalled-query watchdog, the offset desync and lag of the running queries found from their progress). `opsd run`
and `opsd demo` start the same object with their config's checks (`start_monitor`).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import structlog
from prometheus_client import CollectorRegistry
from pyspark.sql import SparkSession
from pyspark.sql.streaming import StreamingQuery

from opsd.checks.registry import Checks, SparkMemory, build_checks
from opsd.checks.scheduler import CheckScheduler
from opsd.config.models import ChecksSettings, OpsdConfig
from opsd.observe.listener import OpsdListener
from opsd.observe.progress import BatchProgress, parse_progress
from opsd.observe.readiness import ProgressPolicy, readiness_probe
from opsd.observe.recorder import Recorder
from opsd.observe.status import StatusStore
from opsd.telemetry.http import BearerToken, OpsHttpServer
from opsd.telemetry.logs import configure_library_logging
from opsd.telemetry.metrics import Metrics
from streaming_core.options import CONF_CLUSTER

log = structlog.get_logger(__name__)


@dataclass
class Monitor:
    """Everything `attach` started; `detach()` stops it and removes the listener from Spark."""

    spark: SparkSession
    metrics: Metrics
    recorder: Recorder
    listener: OpsdListener
    scheduler: CheckScheduler
    http: OpsHttpServer | None
    checks: Checks

    @property
    def url(self) -> str | None:
        return self.http.url if self.http else None

    def detach(self) -> None:
        """Undo `attach`: Spark no longer calls opsd; the endpoint and the checks stop. Each step runs even
        when an earlier one fails (the failure is logged)."""
        for step in (lambda: self.spark.streams.removeListener(self.listener),
                     lambda: self.scheduler.shutdown(wait=False), self.checks.cycle.close, self.listener.stop,
                     self.http.stop if self.http else (lambda: None)):
            try:
                step()
            except Exception:
                log.exception("opsd_detach_step_failed")
        log.info("opsd_detached")


def attach(
    spark: SparkSession,
    *,
    registry: CollectorRegistry | None = None,
    host: str = "127.0.0.1",
    port: int | None = 0,
    policy: ProgressPolicy | None = None,
    watchdog_seconds: float = 10.0,
    desync_seconds: float = 15.0,
    lag_seconds: float = 15.0,
    clock: Callable[[], float] = time.time,
    bearer_token_file: str | None = None,
) -> Monitor:
    """Monitor every streaming query of `spark`. `port=None` serves no HTTP (metrics stay in `registry`);
    `bearer_token_file` guards `/metrics` and `/status` with the token that file holds (read at every request).

    Queries already running are known from the start, under their names. opsd's events reach the script's logging
    (`opsd.telemetry.logs.configure_library_logging`: tracebacks without locals, secrets masked) unless the script
    configured structlog itself. When a step fails (the HTTP port is
    taken, say), whatever was started is stopped again and the error raised: a failed attach leaves nothing.
    """
    configure_library_logging()
    settings = ChecksSettings(watchdog_seconds=watchdog_seconds, desync_seconds=desync_seconds,
                              lag_seconds=lag_seconds)
    return start_monitor(spark, settings, registry=registry, host=host, port=port, policy=policy, clock=clock,
                         token=BearerToken(bearer_token_file) if bearer_token_file else None)


def start_monitor(
    spark: SparkSession,
    settings: ChecksSettings,
    *,
    config: OpsdConfig | None = None,
    memory: SparkMemory | None = None,
    registry: CollectorRegistry | None = None,
    host: str = "127.0.0.1",
    port: int | None = 0,
    policy: ProgressPolicy | None = None,
    clock: Callable[[], float] = time.time,
    token: BearerToken | None = None,
    row_values: bool = False,
) -> Monitor:
    """`attach` with the checks `opsd.checks.registry` builds for `config` (None: the session's running queries
    alone) and `memory` (what the OOM check measures the session by; None: no OOM check)."""
    metrics = Metrics(registry or CollectorRegistry())
    recorder = Recorder(metrics, StatusStore(), clock=clock)
    policy = policy or settings.progress_policy()
    listener = OpsdListener(recorder, metrics)
    scheduler = CheckScheduler(metrics)
    with contextlib.ExitStack() as undo:
        http = None
        if port is not None:
            ui = spark.sparkContext.uiWebUrl  # the Spark UI (Structured Streaming tab), None when it is off
            http = OpsHttpServer(metrics.render, status=lambda: {**recorder.status.to_json(), "spark_ui": ui},
                                 readiness=readiness_probe(recorder.status, policy, clock), host=host, port=port,
                                 token=token, row_values=row_values)
            undo.callback(http.stop)
        listener.start()
        undo.callback(listener.stop)
        for query in spark.streams.active:
            recorder.record_running(query.name, query.id, query.runId)
        spark.streams.addListener(listener)
        undo.callback(spark.streams.removeListener, listener)
        cluster = config.cluster if config is not None else spark.conf.get(CONF_CLUSTER, None)
        checks = build_checks(recorder, settings, config=config, cluster_uri=cluster, progress=recent_progress(spark),
                              memory=memory, policy=policy, clock=clock)
        checks.schedule(scheduler)
        scheduler.start()
        undo.callback(scheduler.shutdown, wait=False)
        if http:
            http.start()
        undo.pop_all()
    log.info("opsd_attached", url=http.url if http else None)
    return Monitor(spark, metrics, recorder, listener, scheduler, http, checks)


def recent_progress(spark: SparkSession) -> Callable[[], Mapping[str, list[BatchProgress]]]:
    """The progress events the desync and lag checks read for queries whose checkpoint location opsd does not know,
    by query name: the last one when it read rows (the common case, one event to fetch), else the recent ones (an
    idle query's last batch with data lies further back)."""
    def events(query: StreamingQuery) -> list[BatchProgress]:
        last = query.lastProgress
        if last is not None and last["numInputRows"] > 0:
            return [parse_progress(last.json)]
        return [parse_progress(p.json) for p in query.recentProgress]

    def read() -> Mapping[str, list[BatchProgress]]:
        return {q.name or q.id: events(q) for q in spark.streams.active}

    return read
