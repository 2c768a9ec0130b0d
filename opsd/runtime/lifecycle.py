"""The lifecycle of a running config: session -> monitor -> runner, torn down in reverse whatever happens.

`opsd run` and `opsd demo` both run inside `running(config)`. On the way out — a clean exit, an exception,
Ctrl-C — the pipelines stop gracefully (the running micro-batch finishes, for at most the config's graceful
timeout), queued listener events are recorded, the monitor detaches and the session stops; each step runs even
when an earlier one failed.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import structlog
from pyspark.sql import SparkSession

from opsd.checks.oom.check import OomCheck
from opsd.checks.oom.collect import SparkRest
from opsd.checks.tuning.check import TuningCheck
from opsd.config.models import OpsdConfig
from opsd.config.spark import spark_defaults
from opsd.runtime.monitor import Monitor, attach
from opsd.runtime.runner import Runner
from streaming_core import build_session

log = structlog.get_logger(__name__)

#: Seconds a stop waits for listener events still queued to be recorded.
FLUSH_SECONDS = 5.0


def session_for(config: OpsdConfig) -> SparkSession:
    """The Spark session of a config: the seeds' best practices, the user's conf, the `yt` format."""
    return build_session(config.spark.app_name, master=config.spark.master, cluster=config.cluster,
                         conf=spark_defaults(config))


def monitor_for(spark: SparkSession, config: OpsdConfig) -> Monitor:
    """`attach` with the config's endpoint and checks, plus the tuning values of the config's pipelines and the
    OOM risk of their next batches (from the Spark UI's REST API, when the UI is on)."""
    monitor = attach(spark, host=config.http.host, port=config.http.port, policy=config.checks.progress_policy(),
                     watchdog_seconds=config.checks.watchdog_seconds)
    check = TuningCheck(config, monitor.recorder)
    monitor.scheduler.run_check("tuning", check.run)  # values known from the start, not after one interval
    monitor.scheduler.add_check("tuning", check.run, config.checks.tuning_seconds)
    context = spark.sparkContext
    if context.uiWebUrl is None:
        log.warning("oom_check_disabled", reason="spark.ui.enabled=false", effect="no memory peaks to read")
    else:
        oom = OomCheck(config, monitor.recorder, SparkRest(context.uiWebUrl, context.applicationId),
                       dict(context.getConf().getAll()))
        monitor.scheduler.add_check("oom", oom.run, config.checks.oom_risk_seconds)
    return monitor


@dataclass
class Running:
    """A config's session, monitor and runner (not started: call `runner.start()`)."""

    config: OpsdConfig
    spark: SparkSession
    monitor: Monitor
    runner: Runner
    _stopped: bool = field(default=False, repr=False)

    def stop(self) -> None:
        """Stop the pipelines gracefully and record what the listener still holds (idempotent)."""
        if self._stopped:
            return
        self._stopped = True
        try:
            self.runner.stop(self.config.spark.graceful_timeout_seconds())
        finally:
            self.monitor.listener.flush(FLUSH_SECONDS)


@contextlib.contextmanager
def running(config: OpsdConfig) -> Iterator[Running]:
    """Build the session, attach the monitor and make the runner; tear all of it down on exit (module docstring)."""
    with contextlib.ExitStack() as teardown:
        spark = session_for(config)
        teardown.callback(_logged, "spark_stop", spark.stop)
        monitor = monitor_for(spark, config)
        teardown.callback(_logged, "monitor_detach", monitor.detach)
        app = Running(config, spark, monitor, Runner(spark, list(config.pipelines), monitor.recorder))
        teardown.callback(_logged, "pipelines_stop", app.stop)
        yield app


def _logged(step: str, func: Callable[[], object]) -> None:
    """Run one teardown step; a failure is logged, so the steps after it still run."""
    try:
        func()
    except Exception:
        log.exception("teardown_step_failed", step=step)
