"""`opsd run CONFIG.yaml`: the daemon. Session, monitoring, pipelines, and a graceful stop on SIGTERM."""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import structlog
from pyspark.sql import SparkSession

from opsd.config import OpsdConfig, load_config, parse_duration_seconds, spark_defaults
from opsd.monitor import Monitor, attach
from opsd.runner import Runner
from opsd.tuning_check import TuningCheck
from streaming_core import build_session

log = structlog.get_logger(__name__)

#: Spark's own key for the graceful-shutdown timeout (milliseconds); opsd honours it too.
GRACEFUL_TIMEOUT_KEY = "spark.streaming.stopGracefullyOnShutdown.timeout"
DEFAULT_GRACEFUL_TIMEOUT_MS = 30_000


def graceful_timeout_seconds(config: OpsdConfig) -> float:
    """The seeds' `spark.streaming.stopGracefullyOnShutdown.timeout`: milliseconds, or a duration ("30 seconds")."""
    value = str(config.spark.conf.get(GRACEFUL_TIMEOUT_KEY, DEFAULT_GRACEFUL_TIMEOUT_MS)).strip()
    return float(value) / 1000 if value.replace(".", "", 1).isdigit() else parse_duration_seconds(value)


def session_for(config: OpsdConfig) -> SparkSession:
    """The Spark session of a config: the seeds' best practices, the user's conf, the `yt` format."""
    return build_session(config.spark.app_name, master=config.spark.master, cluster=config.cluster,
                         conf=spark_defaults(config))


def monitor_for(spark: SparkSession, config: OpsdConfig) -> Monitor:
    """`attach` with the config's endpoint and checks, plus the tuning values of the config's pipelines."""
    monitor = attach(spark, host=config.http.host, port=config.http.port, policy=config.checks.progress_policy(),
                     watchdog_seconds=config.checks.watchdog_seconds)
    check = TuningCheck(config, monitor.recorder)
    monitor.scheduler.run_check("tuning", check.run)  # values known from the start, not after one interval
    monitor.scheduler.add_check("tuning", check.run, config.checks.tuning_seconds)
    return monitor


@contextmanager
def stop_on_signals(stop: threading.Event) -> Iterator[None]:
    """SIGTERM and SIGINT set `stop` instead of killing the process (main thread only)."""
    handled = (signal.SIGTERM, signal.SIGINT)
    previous = {s: signal.signal(s, lambda signum, frame: stop.set()) for s in handled}
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)


def run(config_path: str | Path, stop: threading.Event | None = None) -> int:
    """Run every pipeline of the config until SIGTERM/SIGINT (or `stop`), or until all have finished.

    The signal handlers are in place before Spark starts, so a SIGTERM during start-up is a clean exit too.
    """
    config = load_config(config_path)
    stop = stop or threading.Event()
    in_main = threading.current_thread() is threading.main_thread()
    with stop_on_signals(stop) if in_main else _nothing():
        spark = session_for(config)
        monitor = monitor_for(spark, config)
        runner = Runner(spark, list(config.pipelines), monitor.recorder)
        log.info("opsd_started", pipelines=[p.name for p in config.pipelines], url=monitor.url)
        try:
            if not stop.is_set():
                runner.start()
                runner.wait(stop)
        finally:
            runner.stop(graceful_timeout_seconds(config))
            monitor.listener.flush(5)
            monitor.detach()
            spark.stop()
    gave_up = [s.name for s in runner.supervisors if s.gave_up]
    log.info("opsd_stopped", gave_up=gave_up)
    return 1 if gave_up else 0


@contextmanager
def _nothing() -> Iterator[None]:
    yield
