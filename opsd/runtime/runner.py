"""The runner (supervisor): start each query, restart it after a failure that can pass with capped exponential
backoff, stop it for good after one that cannot (`opsd.observe.failures`), and stop them all gracefully (the
running micro-batch finishes) on shutdown.

Deciding (`Backoff`) is separate from acting (`Supervisor`), so the restart policy is tested with plain
numbers and the supervisor with a real Spark session.

Before every start and restart the supervisor calls its `before_start(name, failure_text)` hooks in order (the OOM
check's, then the auto-tuner's: `opsd.checks.oom.check.OomCheck.before_start`,
`opsd.checks.autotune.check.AutotuneCheck.before_start`): a query starts with a cap its first batch survives and
restarts after an out-of-memory failure with the cut cap. A failing hook is logged and never stops the start, nor
the hooks after it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import structlog
from pyspark.sql import SparkSession
from pyspark.sql.streaming import StreamingQuery

from opsd.checks.registry import BeforeStart
from opsd.config.models import PipelineConfig, RestartPolicy
from opsd.observe.failures import Failure, classify, failure_text
from opsd.observe.recorder import Recorder
from opsd.runtime.pipeline import start_query

log = structlog.get_logger(__name__)

#: A query that ran this long before failing is considered healthy again: its backoff starts over.
HEALTHY_RUN_SECONDS = 60.0
#: How often a supervisor looks at its running query (crash-loop reset) and a stop at the running batch.
POLL_SECONDS = 0.1
#: Seconds a stop waits for the pipeline's thread once its query was stopped.
JOIN_SECONDS = 5.0
_MAX_DOUBLINGS = 64


@dataclass(frozen=True)
class Backoff:
    """The restart decision for the n-th consecutive failure of a query."""

    policy: RestartPolicy

    def delay(self, failures: int) -> float:
        # Doubling beyond the cap changes nothing; bounding the exponent keeps a years-long crash loop
        # from overflowing the float conversion.
        doublings = min(max(0, failures - 1), _MAX_DOUBLINGS)
        return min(self.policy.initial_backoff_seconds * 2**doublings, self.policy.max_backoff_seconds)

    def at_cap(self, failures: int) -> bool:
        """A crash loop: the delay has reached its maximum."""
        return self.delay(failures) >= self.policy.max_backoff_seconds

    def gives_up(self, failures: int) -> bool:
        return self.policy.max_restarts is not None and failures > self.policy.max_restarts


class Supervisor:
    """Runs one pipeline's query in a thread of its own until it finishes, gives up, or is stopped.

    A query that runs `healthy_after_seconds` after a restart clears the crash-loop flag, and its next
    failure starts the backoff over.
    """

    def __init__(self, spark: SparkSession, pipeline: PipelineConfig, recorder: Recorder,
                 start: Callable[[SparkSession, PipelineConfig], StreamingQuery] = start_query,
                 clock: Callable[[], float] = time.monotonic,
                 healthy_after_seconds: float = HEALTHY_RUN_SECONDS,
                 before_start: Sequence[BeforeStart] = ()) -> None:
        self.spark = spark
        self._before_start = tuple(before_start)
        self.pipeline = pipeline
        self.recorder = recorder
        self.backoff = Backoff(pipeline.restart)
        self._start = start
        self._clock = clock
        self._healthy_after = healthy_after_seconds
        self._stopping = threading.Event()
        self._query: StreamingQuery | None = None
        self._crash_loop = False
        self._thread = threading.Thread(target=self._run, name=f"opsd-{pipeline.name}", daemon=True)
        self.finished = threading.Event()
        self.gave_up = False
        #: Set when the pipeline stopped for good on a failure that a restart cannot fix.
        self.permanent_failure: Failure | None = None
        #: Set when Spark's JVM is gone: nothing in this process can restart the query (see `Failure`).
        self.driver_gone: Failure | None = None

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

    def refuse(self, failure: Failure) -> None:
        """Do not start the pipeline at all: its pre-flight found a failure that a start cannot get past."""
        self.recorder.register(self.name, self.pipeline.trigger.interval_seconds)
        self.fail_permanently(failure)
        self.finished.set()

    def _run(self) -> None:
        failures, last_failure = 0, None
        try:
            while not self._stopping.is_set():
                self._prepare(last_failure)
                started, ran = self._clock(), False
                try:
                    self._query = self._start(self.spark, self.pipeline)
                    ran = True
                    self._await(self._query, started)
                    return  # stopped, or a one-shot trigger (availableNow / once) completed
                except Exception as e:
                    if self._stopping.is_set():
                        return
                    failure = classify(e)
                    last_failure = failure_text(e)
                    if failure.driver_gone:
                        self.driver_gone = failure
                        log.error("spark_driver_gone", query=self.name, error=failure.message)
                        return
                    # A query that ran and failed was named by the recorder's `query_failed` line (from its
                    # termination event): the supervisor's line says only what it does about it.
                    if failure.permanent:
                        self.fail_permanently(failure, named=not ran)
                        return
                    failures = 1 if self._clock() - started > self._healthy_after else failures + 1
                    if not self._restart_after(failure, failures, named=not ran):
                        return
        finally:
            self.finished.set()

    def _prepare(self, failure: str | None) -> None:
        for hook in self._before_start:
            try:
                hook(self.name, failure)
            except Exception:
                log.exception("before_start_failed", query=self.name, hook=getattr(hook, "__qualname__", repr(hook)))

    def _await(self, query: StreamingQuery, started: float) -> None:
        """Wait for the query to end (raising its failure); clear the crash-loop flag once it runs healthily."""
        while not query.awaitTermination(POLL_SECONDS * 10):
            if self._crash_loop and self._clock() - started > self._healthy_after:
                self._set_crash_loop(False)

    def fail_permanently(self, failure: Failure, named: bool = True) -> None:
        """Stop the pipeline for good (a restart would fail the same way): say so in logs, metrics and status. The log
        line names the failure (class, message) unless `named` is False: a line said them already."""
        self.permanent_failure = failure
        log.error("pipeline_failed_permanently", query=self.name, **_naming(failure, named))
        self.recorder.record_permanent_failure(self.name, failure.exception_class, failure.message)

    def _restart_after(self, failure: Failure, failures: int, named: bool) -> bool:
        if self.backoff.gives_up(failures):
            self.gave_up = True
            log.error("pipeline_gave_up", query=self.name, failures=failures, **_naming(failure, named))
            return False
        delay = self.backoff.delay(failures)
        log.warning("pipeline_failed", query=self.name, failures=failures, retry_in_seconds=delay,
                    **_naming(failure, named))
        if self.backoff.at_cap(failures):
            self._set_crash_loop(True)  # visible while waiting out the capped delay, not only after it
        if self._stopping.wait(delay):
            return False
        self._crash_loop = self.backoff.at_cap(failures)
        self.recorder.record_restart(self.name, crash_loop=self._crash_loop)
        return True

    def _set_crash_loop(self, crash_loop: bool) -> None:
        self._crash_loop = crash_loop
        self.recorder.record_crash_loop(self.name, crash_loop)

    def stop(self, timeout: float) -> None:
        """Let the running micro-batch finish (up to `timeout` seconds), then stop the query.

        Also stops a query that is still starting when called, and one started by a restart racing the stop.
        """
        self._stopping.set()
        deadline = self._clock() + timeout
        while self._thread.is_alive() and self._clock() < deadline + JOIN_SECONDS:
            query = self._query
            if query is not None and query.isActive:
                stop_after_running_batch(query, deadline, self._clock)
            self._thread.join(POLL_SECONDS)
        if self._thread.is_alive():
            log.error("pipeline_stop_timed_out", query=self.name)
            return
        log.info("pipeline_stopped", query=self.name)


def _naming(failure: Failure, named: bool) -> dict[str, str]:
    """The keys of a supervisor's log line that name `failure`, if it is to name it."""
    return {"exception_class": failure.exception_class, "error": failure.message} if named else {}


def stop_after_running_batch(query: StreamingQuery, deadline: float,
                             clock: Callable[[], float] = time.monotonic) -> None:
    """Stop `query` between micro-batches: once the batch running now has completed, or at `deadline`.

    Spark has no "stop after this batch" call: waiting for the trigger to go idle is not enough when batches
    run back to back, so the completion of the running batch (a newer `lastProgress`) counts as well.
    """
    running_after = _last_batch_id(query)
    while (clock() < deadline and query.isActive and query.status.get("isTriggerActive")
           and _last_batch_id(query) == running_after):
        time.sleep(POLL_SECONDS / 2)
    query.stop()


def _last_batch_id(query: StreamingQuery) -> int:
    progress = query.lastProgress
    return int(progress["batchId"]) if progress else -1


class Runner:
    """All pipelines of a config, each under its own `Supervisor`."""

    def __init__(self, spark: SparkSession, pipelines: list[PipelineConfig], recorder: Recorder,
                 before_start: Sequence[BeforeStart] = ()) -> None:
        self.supervisors = [Supervisor(spark, p, recorder, before_start=before_start) for p in pipelines]

    def start(self) -> None:
        """Start every pipeline that was not refused."""
        for s in self.supervisors:
            if not s.finished.is_set():
                s.start()

    def refuse(self, name: str, failure: Failure) -> None:
        next(s for s in self.supervisors if s.name == name).refuse(failure)

    def all_finished(self) -> bool:
        """Every pipeline ended by itself, and none for good on a failure (that one stays visible until a stop)."""
        return all(s.finished.is_set() and s.permanent_failure is None for s in self.supervisors)

    def driver_gone(self) -> bool:
        """Spark's JVM is gone: no pipeline of this process can run again."""
        return any(s.driver_gone for s in self.supervisors)

    def wait(self, stop: threading.Event, poll_seconds: float = 0.5) -> None:
        """Block until `stop` is set, every pipeline has finished by itself (see `all_finished`), or the driver is
        gone."""
        while not stop.wait(poll_seconds) and not self.all_finished() and not self.driver_gone():
            pass

    def stop(self, timeout: float) -> None:
        """Stop every pipeline at once, so the whole stop takes at most about `timeout` seconds."""
        stoppers = [threading.Thread(target=s.stop, args=(timeout,), name=f"opsd-stop-{s.name}")
                    for s in self.supervisors]
        for t in stoppers:
            t.start()
        for t in stoppers:
            t.join()
