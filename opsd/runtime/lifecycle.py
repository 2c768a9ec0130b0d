"""The lifecycle of a running config: session -> monitor -> runner, torn down in reverse whatever happens.

`opsd run` and `opsd demo` both run inside `running(config)`. A taken HTTP port fails it before Spark starts
(`opsd.telemetry.http.PortInUseError`). On the way out — a clean exit, an exception, Ctrl-C — the pipelines stop
gracefully (the running micro-batch finishes, for at most the config's graceful timeout), queued listener events
are recorded, the monitor detaches and the session stops; each step runs even when an earlier one failed.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import structlog
from pyspark.sql import SparkSession

from opsd.checks.oom.collect import SparkRest
from opsd.checks.oom.sampler import MemorySampler
from opsd.checks.registry import BeforeStart, SparkMemory
from opsd.config.models import OpsdConfig
from opsd.config.spark import spark_defaults, spark_environment
from opsd.observe.failures import classify
from opsd.runtime.monitor import Monitor, start_monitor
from opsd.runtime.runner import Runner
from opsd.telemetry.http import BearerToken, check_port_free
from opsd.telemetry.logs import children_write_to
from streaming_core import build_session

log = structlog.get_logger(__name__)

#: Seconds a stop waits for listener events still queued to be recorded.
FLUSH_SECONDS = 5.0


def session_for(config: OpsdConfig) -> SparkSession:
    """The Spark session of a config: the seeds' best practices, the user's conf, the `yt` format, and the Spark UI
    bound where the config says (`spark_environment`: the JVM reads it from the environment)."""
    for name, value in spark_environment(config, os.environ).items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value
    return build_session(config.spark.app_name, master=config.spark.master, cluster=config.cluster,
                         conf=spark_defaults(config))


def monitor_for(spark: SparkSession, config: OpsdConfig, teardown: contextlib.ExitStack
                ) -> tuple[Monitor, list[BeforeStart]]:
    """The monitor with the config's endpoint and checks (`opsd.checks.registry`): the watchdog, the tuning values
    of the config's pipelines, the offset desync and lag of its pipelines and watched queries (desync healed where the
    config enables it), the OOM risk of their next batches (from the Spark UI's REST API, when the UI is on; in local
    mode with the memory sampler, stopped by `teardown`) and the auto-tuner. Returns the hooks the runner calls
    before every start: the OOM check's verdict first, then the tuner that reads it."""
    checks = config.checks
    monitor = start_monitor(spark, checks, config=config, memory=spark_memory(spark, config, teardown),
                            host=config.http.host, port=config.http.port,
                            token=BearerToken(config.http.bearer_token_file) if config.http.bearer_token_file else None,
                            row_values=config.http.status_row_values)
    return monitor, monitor.checks.before_start


def spark_memory(spark: SparkSession, config: OpsdConfig, teardown: contextlib.ExitStack) -> SparkMemory | None:
    """What the OOM check measures the session's memory by; None (and a warning) when the Spark UI is off."""
    context = spark.sparkContext
    if context.uiWebUrl is None:
        log.warning("oom_check_disabled", reason="spark.ui.enabled=false", effect="no memory peaks to read")
        return None
    conf = dict(context.getConf().getAll())
    sampler = None
    if conf.get("spark.master", config.spark.master).startswith("local"):  # the executor's processes are ours
        sampler = MemorySampler.for_spark(context).start()
        teardown.callback(_logged, "memory_sampler_stop", sampler.stop)
    return SparkMemory(SparkRest(context.uiWebUrl, context.applicationId), conf, sampler)


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
def running(config: OpsdConfig, spark_output: Path | None = None) -> Iterator[Running]:
    """Build the session, attach the monitor and make the runner; tear all of it down on exit (module docstring).

    With `spark_output`, whatever Spark's JVM and its Python workers print goes to that file, not to this process's
    terminal (the demo draws its view there).
    """
    check_port_free(config.http.host, config.http.port)  # a taken port fails now, not after Spark's start-up
    with contextlib.ExitStack() as teardown:
        with children_write_to(spark_output) if spark_output else contextlib.nullcontext(), _keeping_ctrl_c():
            spark = session_for(config)
        teardown.callback(_logged, "spark_stop", spark.stop)
        monitor, before_start = monitor_for(spark, config, teardown)
        teardown.callback(_logged, "monitor_detach", monitor.detach)
        runner = Runner(spark, list(config.pipelines), monitor.recorder, before_start=before_start)
        app = Running(config, spark, monitor, runner)
        teardown.callback(_logged, "pipelines_stop", app.stop)
        yield app


@contextlib.contextmanager
def _keeping_ctrl_c() -> Iterator[None]:
    """Put back the SIGINT handler a new SparkContext replaces: PySpark's cancels every running job before it
    raises KeyboardInterrupt, so Ctrl-C would kill the running micro-batch instead of letting opsd stop gracefully
    (the daemon's handler, or the demo's KeyboardInterrupt)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    handler = signal.getsignal(signal.SIGINT)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, handler)


def _logged(step: str, func: Callable[[], object]) -> None:
    """Run one teardown step; a failure is logged, so the steps after it still run. A step that fails because Spark's
    JVM has already exited (a SIGTERM sent to opsd's whole process group reaches the JVM too) is one line, no trace."""
    try:
        func()
    except Exception as error:
        if classify(error).driver_gone:
            log.warning("teardown_step_skipped", step=step, reason="spark_jvm_exited")
        else:
            log.exception("teardown_step_failed", step=step)
