"""The daemon, `opsd run CONFIG.yaml`: the config's pipelines until SIGTERM, then a graceful stop."""

from __future__ import annotations

import contextlib
import signal
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import structlog

from opsd.config.claims import claimed
from opsd.config.load import load_config
from opsd.doctor.advice import Naming
from opsd.doctor.diagnose import resume_findings
from opsd.observe.failures import Failure
from opsd.runtime.lifecycle import running, session_for
from opsd.runtime.preflight import Problem, preflight
from opsd.telemetry.logs import configure_logging
from opsd.telemetry.terminal import Shown
from streaming_core.cluster import connect

log = structlog.get_logger(__name__)


@contextmanager
def stop_on_signals(stop: threading.Event) -> Iterator[list[int]]:
    """SIGTERM and SIGINT set `stop` instead of killing the process (main thread only); yields the signals
    received."""
    received: list[int] = []

    def handle(signum: int, frame: object) -> None:
        received.append(signum)
        stop.set()

    handled = (signal.SIGTERM, signal.SIGINT)
    previous = {s: signal.signal(s, handle) for s in handled}
    try:
        yield received
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)


def run(config_path: str | Path, stop: threading.Event | None = None, log_level: str | None = None) -> int:
    """Run every pipeline of the config until SIGTERM/SIGINT (or `stop`), or until all have finished.

    The signal handlers are in place before Spark starts, so a SIGTERM during start-up is a clean exit too. Each
    pipeline's checkpoint location and consumer are claimed against other opsd processes first
    (`opsd.config.claims`: a `ClaimError` names both pipelines).
    On the way out the running micro-batches finish (see `opsd.runtime.lifecycle`). Exit code: 1 when a
    pipeline gave up or failed for good, or Spark's driver JVM died (the process must be restarted: the tuner's
    cuts are in the tuning documents, so the restart starts from them), 130 after Ctrl-C (SIGINT), else 0.
    """
    config = load_config(config_path)
    if log_level is not None:
        config = config.model_copy(update={"logging": config.logging.model_copy(update={"level": log_level})})
    configure_logging(config.logging.level, json_lines=config.logging.json_lines(sys.stderr),
                      levels=config.logging.levels)
    stop = stop or threading.Event()
    in_main = threading.current_thread() is threading.main_thread()
    with stop_on_signals(stop) if in_main else contextlib.nullcontext([]) as received, \
            claimed(config, config_path), running(config) as app:
        for name, problems in preflight(config, app.spark).items():
            if problems:
                log.error("pipeline_preflight_failed", query=name, problems=[str(p) for p in problems])
                app.runner.refuse(name, Failure("PreflightError", "; ".join(map(str, problems)), permanent=True))
        log.info("opsd_started", pipelines=[p.name for p in config.pipelines], url=app.monitor.url)
        if not stop.is_set():
            app.runner.start()
            app.runner.wait(stop)
    gave_up = [s.name for s in app.runner.supervisors if s.gave_up]
    failed = [s.name for s in app.runner.supervisors if s.permanent_failure]
    gone = app.runner.driver_gone()
    log.info("opsd_stopped", gave_up=gave_up, failed_permanently=failed, spark_driver_gone=gone)
    if gave_up or failed or gone:
        return 1
    return 128 + signal.SIGINT if signal.SIGINT in received else 0


def check(config_path: str | Path) -> int:
    """`opsd run --check`: validate the config, pre-flight every pipeline and check that its checkpoint can resume
    (the doctor's desync findings: behind the trim, past the queue's end, ...), start no query; 1 on any problem,
    each named with its fix. Spark starts only for a `yt` sink (its schema fit)."""
    config = load_config(config_path)
    # Spark only where pre-flight needs it: the fit of a `yt` sink's schema (the query is built, not started).
    spark = session_for(config) if any(p.sink.format == "yt" for p in config.pipelines) else None
    try:
        found = [problem for problems in preflight(config, spark).values() for problem in problems]
    finally:
        if spark is not None:
            spark.stop()
    naming = Naming.of_config(str(config_path), config.cluster)
    with connect(config.cluster) as cluster:
        found += [Problem(f.query, "checkpoint", f"{f.what}; fix: {f.advice}")
                  for f in resume_findings(cluster, config, naming, time.time())]
    shown = Shown()
    for problem in found:
        print(shown.line(f"problem: {problem}"))
    print(f"{len(config.pipelines)} pipeline(s) checked: " + (f"{len(found)} problem(s)" if found else "ready to run"))
    return 1 if found else 0
