"""Keep pipelines running: start each query, restart it after a failure with capped exponential backoff,
and stop them all gracefully (the running micro-batch finishes) on shutdown.

Deciding (`Backoff`) is separate from acting (`Supervisor`), so the restart policy is tested with plain
numbers and the supervisor with a real Spark session.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

import structlog
from pyspark.sql import SparkSession
from pyspark.sql.streaming import StreamingQuery

from opsd.config import PipelineConfig, RestartPolicy
from opsd.pipeline import start_query
from opsd.recorder import Recorder

log = structlog.get_logger(__name__)

#: A query that ran this long before failing is considered healthy again: its backoff starts over.
HEALTHY_RUN_SECONDS = 60.0


@dataclass(frozen=True)
class Backoff:
    """The restart decision for the n-th consecutive failure of a query."""

    policy: RestartPolicy

    def delay(self, failures: int) -> float:
        return min(self.policy.initial_backoff_seconds * 2 ** max(0, failures - 1), self.policy.max_backoff_seconds)

    def at_cap(self, failures: int) -> bool:
        """A crash loop: the delay has reached its maximum."""
        return self.delay(failures) >= self.policy.max_backoff_seconds

    def gives_up(self, failures: int) -> bool:
        return self.policy.max_restarts is not None and failures > self.policy.max_restarts


class Supervisor:
    """Runs one pipeline's query in a thread of its own until it finishes, gives up, or is stopped."""

    def __init__(self, spark: SparkSession, pipeline: PipelineConfig, recorder: Recorder,
                 start: Callable[[SparkSession, PipelineConfig], StreamingQuery] = start_query,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.spark = spark
        self.pipeline = pipeline
        self.recorder = recorder
        self.backoff = Backoff(pipeline.restart)
        self._start = start
        self._clock = clock
        self._stopping = threading.Event()
        self._query: StreamingQuery | None = None
        self._thread = threading.Thread(target=self._run, name=f"opsd-{pipeline.name}", daemon=True)
        self.finished = threading.Event()
        self.gave_up = False

    @property
    def name(self) -> str:
        return self.pipeline.name

    @property
    def query(self) -> StreamingQuery | None:
        """The current (or last) query of the pipeline."""
        return self._query

    def start(self) -> None:
        self.recorder.register(self.name, self.pipeline.trigger.interval_seconds)
        self._thread.start()

    def _run(self) -> None:
        failures = 0
        try:
            while not self._stopping.is_set():
                started = self._clock()
                try:
                    self._query = self._start(self.spark, self.pipeline)
                    self._query.awaitTermination()
                    return  # stopped, or a one-shot trigger (availableNow / once) completed
                except Exception as e:
                    if self._stopping.is_set():
                        return
                    failures = 1 if self._clock() - started > HEALTHY_RUN_SECONDS else failures + 1
                    if not self._restart_after(e, failures):
                        return
        finally:
            self.finished.set()

    def _restart_after(self, error: Exception, failures: int) -> bool:
        if self.backoff.gives_up(failures):
            self.gave_up = True
            log.error("pipeline_gave_up", query=self.name, failures=failures, error=_first_line(error))
            return False
        delay = self.backoff.delay(failures)
        log.warning("pipeline_failed", query=self.name, failures=failures, retry_in_seconds=delay,
                    error=_first_line(error))
        if self._stopping.wait(delay):
            return False
        self.recorder.record_restart(self.name, crash_loop=self.backoff.at_cap(failures))
        return True

    def stop(self, timeout: float) -> None:
        """Let the running micro-batch finish (up to `timeout` seconds), then stop the query."""
        self._stopping.set()
        query = self._query
        deadline = self._clock() + timeout
        if query is not None and query.isActive:
            while query.status.get("isTriggerActive") and self._clock() < deadline:
                time.sleep(0.1)
            query.stop()
        self._thread.join(max(0.0, deadline - self._clock()) + 5)
        log.info("pipeline_stopped", query=self.name)


class Runner:
    """All pipelines of a config, each under its own `Supervisor`."""

    def __init__(self, spark: SparkSession, pipelines: list[PipelineConfig], recorder: Recorder) -> None:
        self.supervisors = [Supervisor(spark, p, recorder) for p in pipelines]

    def start(self) -> None:
        for s in self.supervisors:
            s.start()

    def all_finished(self) -> bool:
        return all(s.finished.is_set() for s in self.supervisors)

    def wait(self, stop: threading.Event, poll_seconds: float = 0.5) -> None:
        """Block until `stop` is set or every pipeline has finished by itself."""
        while not stop.wait(poll_seconds) and not self.all_finished():
            pass

    def stop(self, timeout: float) -> None:
        for s in self.supervisors:
            s.stop(timeout)


def _first_line(error: BaseException) -> str:
    """A one-line reason; for errors raised in the JVM, the Java exception rather than Py4J's wrapper."""
    java = getattr(error, "java_exception", None)
    text = (java.toString() if java is not None else str(error)).strip()
    return text.splitlines()[0][:500] if text else type(error).__name__
