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

from opsd.config.claims import Claim, claimed
from opsd.config.load import load_config
from opsd.doctor.advice import Naming
from opsd.doctor.diagnose import resume_findings
from opsd.observe.failures import Failure
from opsd.observe.recorder import Recorder
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


class LostClaims:
    """The daemon's answer to a claim on YTsaurus lost while it runs (`claimed`'s `on_lost`, called from a pinger
    thread): another opsd may hold the checkpoint location or consumer by now, so this one must not move it any more.
    The loss is logged (`claim_lost`), counted (`opsd_claims_lost_total`, once a recorder is there) and `stop` is set:
    the daemon stops gracefully (the running batches finish, no heal or seek starts) and exits with 1; its restart
    claims again, or is refused naming the holder."""

    def __init__(self, stop: threading.Event) -> None:
        self.stop = stop
        self.lost: list[Claim] = []
        self._recorder: Recorder | None = None
        self._lock = threading.Lock()

    def __call__(self, claim: Claim) -> None:
        log.error("claim_lost", query=claim.pipeline, kind=claim.kind, what=claim.what, action="stopping")
        with self._lock:
            self.lost.append(claim)
            recorder = self._recorder
        if recorder is not None:
            recorder.record_claim_lost(claim.pipeline, claim.kind)
        self.stop.set()

    def count_in(self, recorder: Recorder) -> None:
        """Count losses in `recorder` from now on, and those before it."""
        with self._lock:
            self._recorder, before = recorder, list(self.lost)
        for claim in before:
            recorder.record_claim_lost(claim.pipeline, claim.kind)


def run(config_path: str | Path, stop: threading.Event | None = None, log_level: str | None = None) -> int:
    """Run every pipeline of the config until SIGTERM/SIGINT (or `stop`), or until all have finished.

    The signal handlers are in place before Spark starts, so a SIGTERM during start-up is a clean exit too. Each
    pipeline's checkpoint location and consumer are claimed against other opsd processes first
    (`opsd.config.claims`: a `ClaimError` names both pipelines); a claim lost while running stops the daemon
    (`LostClaims`).
    On the way out the running micro-batches finish (see `opsd.runtime.lifecycle`). Exit code: 1 when a
    pipeline gave up or failed for good, a claim was lost, or Spark's driver JVM died (the process must be restarted:
    the tuner's cuts are in the tuning documents, so the restart starts from them), 130 after Ctrl-C (SIGINT), else 0.
    """
    config = load_config(config_path)
    if log_level is not None:
        config = config.model_copy(update={"logging": config.logging.model_copy(update={"level": log_level})})
    configure_logging(config.logging.level, json_lines=config.logging.json_lines(sys.stderr),
                      levels=config.logging.levels)
    stop = stop or threading.Event()
    lost = LostClaims(stop)
    in_main = threading.current_thread() is threading.main_thread()
    with stop_on_signals(stop) if in_main else contextlib.nullcontext([]) as received, \
            claimed(config, config_path, lost), running(config) as app:
        lost.count_in(app.monitor.recorder)
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
    claims_lost = [claim.pipeline for claim in lost.lost]
    log.info("opsd_stopped", gave_up=gave_up, failed_permanently=failed, spark_driver_gone=gone,
             claims_lost=claims_lost)
    if gave_up or failed or gone or claims_lost:
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
