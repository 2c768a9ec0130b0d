"""`opsd.attach(spark)`: opsd's monitoring for any Spark session with one call, and `detach()` to undo it.

Wires the pieces together: metrics (one registry), the status store, the recorder, the listener that
never blocks Spark, the HTTP endpoint and the scheduled checks (the stalled-query watchdog; later checks
plug in with `Monitor.scheduler.add_check`). `opsd run` and `opsd demo` use the same object.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import structlog
from prometheus_client import CollectorRegistry
from pyspark.sql import SparkSession

from opsd.http import OpsHttpServer
from opsd.listener import OpsdListener
from opsd.metrics import Metrics
from opsd.recorder import Recorder
from opsd.scheduler import CheckScheduler
from opsd.status import ProgressPolicy, StatusStore
from opsd.watchdog import Watchdog

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

    @property
    def url(self) -> str | None:
        return self.http.url if self.http else None

    def detach(self) -> None:
        """Undo `attach`: Spark no longer calls opsd; the endpoint and the checks stop."""
        self.spark.streams.removeListener(self.listener)
        self.scheduler.shutdown(wait=False)
        self.listener.stop()
        if self.http:
            self.http.stop()
        log.info("opsd_detached")


def attach(
    spark: SparkSession,
    *,
    registry: CollectorRegistry | None = None,
    host: str = "127.0.0.1",
    port: int | None = 0,
    policy: ProgressPolicy | None = None,
    watchdog_seconds: float = 10.0,
    clock: Callable[[], float] = time.time,
) -> Monitor:
    """Monitor every streaming query of `spark`. `port=None` serves no HTTP (metrics stay in `registry`)."""
    metrics = Metrics(registry or CollectorRegistry())
    recorder = Recorder(metrics, StatusStore(), clock=clock)
    listener = OpsdListener(recorder, metrics)
    listener.start()
    spark.streams.addListener(listener)
    policy = policy or ProgressPolicy()
    scheduler = CheckScheduler(metrics)
    scheduler.add_check("watchdog", Watchdog(recorder, policy, clock=clock).run, watchdog_seconds)
    scheduler.start()
    http = None
    if port is not None:
        http = OpsHttpServer(metrics.registry, recorder.status, host=host, port=port, policy=policy, clock=clock,
                             exposition=metrics.render)
        http.start()
    log.info("opsd_attached", url=http.url if http else None)
    return Monitor(spark, metrics, recorder, listener, scheduler, http)
