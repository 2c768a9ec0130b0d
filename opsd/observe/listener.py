"""The listener: a StreamingQueryListener that never blocks or breaks Spark, and the thread that records its events.

Spark calls listener callbacks on its listener-bus thread (through Py4J for Python listeners); a
slow or raising callback delays or spams every other listener of the application. So the callbacks
only count the event and put a deferred conversion on a bounded queue (``put_nowait``; a full queue
drops the event and counts it). A daemon consumer thread converts the event and hands it to the
:class:`~opsd.observe.recorder.Recorder`.

Spark's calls reach the listener as raw Java events (:class:`_SparkCalls`): PySpark's own adapter
would first turn each one into a Python event on the bus thread, for a progress event dozens of Py4J
round trips. Here the consumer thread converts them instead: one ``progress.json()`` call per batch.
"""

from __future__ import annotations

import contextlib
import queue
import threading
import time
from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING

import structlog
from pyspark import SparkContext
from pyspark.sql.streaming import StreamingQueryListener
from pyspark.sql.streaming.listener import QueryIdleEvent, QueryStartedEvent, QueryTerminatedEvent

from opsd.observe.events import (
    QueryEvent,
    from_java_progress,
    from_spark_idle,
    from_spark_progress,
    from_spark_started,
    from_spark_terminated,
)
from opsd.observe.recorder import Recorder
from opsd.telemetry.metrics import Metrics

if TYPE_CHECKING:
    from py4j.java_gateway import JavaObject
    from pyspark.sql.streaming.listener import QueryProgressEvent

log = structlog.get_logger(__name__)

_Pending = Callable[[], QueryEvent]
_STOP = None


class OpsdListener(StreamingQueryListener):
    """Queue-backed listener; register it with ``spark.streams.addListener(listener)``.

    Call :meth:`start` before registering and :meth:`stop` after removing it. Events received
    while the consumer is not running wait in the queue (up to ``max_queue``).
    """

    def __init__(self, recorder: Recorder, metrics: Metrics, max_queue: int = 10_000) -> None:
        super().__init__()
        self._recorder = recorder
        self._metrics = metrics
        self._queue: queue.Queue[_Pending | None] = queue.Queue(maxsize=max_queue)
        self._thread: threading.Thread | None = None
        self._dropping = False
        self._java: JavaObject | None = None

    @property
    def _jlistener(self) -> JavaObject:
        """What `spark.streams.addListener` registers in the JVM: Spark's calls with raw Java events."""
        if self._java is None:
            self._java = SparkContext._jvm.PythonStreamingQueryListenerWrapper(_SparkCalls(self))
        return self._java

    # The listener interface with PySpark's events (Spark itself calls `_SparkCalls`): count, enqueue,
    # never raise.

    def onQueryStarted(self, event: QueryStartedEvent) -> None:
        self._offer("started", partial(from_spark_started, event))

    def onQueryProgress(self, event: QueryProgressEvent) -> None:
        self._offer("progress", partial(from_spark_progress, event))

    def onQueryIdle(self, event: QueryIdleEvent) -> None:
        self._offer("idle", partial(from_spark_idle, event))

    def onQueryTerminated(self, event: QueryTerminatedEvent) -> None:
        self._offer("terminated", partial(from_spark_terminated, event))

    def _offer(self, kind: str, pending: _Pending) -> None:
        try:
            self._metrics.listener_events.labels(event=kind).inc()
            self._queue.put_nowait(pending)
            self._dropping = False
        except queue.Full:
            self._drop(kind, "queue_full")
        except Exception:
            self._drop(kind, "error")

    def _drop(self, kind: str, reason: str) -> None:
        """Count a lost event; log only the first of a run of drops, so overload cannot flood logs.

        Runs on Spark's thread, so it must not raise either.
        """
        with contextlib.suppress(Exception):
            self._metrics.listener_dropped_events.inc()
            if not self._dropping:
                log.warning("listener_event_dropped", kind=kind, reason=reason, exc_info=reason == "error")
            self._dropping = True

    # The consumer thread.

    def start(self) -> None:
        """Start the consumer thread (idempotent)."""
        if self._thread is not None and self._thread.is_alive():
            return
        self._thread = threading.Thread(target=self._consume, name="opsd-listener", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        """Record what is queued (within ``timeout``) and stop the consumer thread.

        A consumer still busy after ``timeout`` is kept (and logged), so that a later `stop` waits for it again
        instead of leaving it running unseen.
        """
        thread = self._thread
        if thread is None:
            return
        try:
            self._queue.put(_STOP, timeout=timeout)
        except queue.Full:
            log.warning("listener_stop_queue_full", pending=self._queue.qsize())
        thread.join(timeout)
        if thread.is_alive():
            log.warning("listener_stop_timed_out", pending=self._queue.qsize(), timeout_seconds=timeout)
            return
        self._thread = None

    def flush(self, timeout: float = 10.0) -> bool:
        """Wait until every queued event is recorded; False if ``timeout`` passed first."""
        deadline = time.monotonic() + timeout
        with self._queue.all_tasks_done:
            while self._queue.unfinished_tasks:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self._queue.all_tasks_done.wait(remaining)
        return True

    def _consume(self) -> None:
        while True:
            pending = self._queue.get()
            try:
                if pending is _STOP:
                    return
                self._recorder.record(pending())
            except Exception:
                self._metrics.listener_dropped_events.inc()
                log.exception("listener_event_failed")
            finally:
                self._queue.task_done()


class _SparkCalls:
    """Spark's listener interface through Py4J, like PySpark's adapter but without its conversions.

    Each call only queues the Java event; the consumer thread converts it, with PySpark's conversion for
    the rare lifecycle events and a single `json()` call for progress.
    """

    def __init__(self, listener: OpsdListener) -> None:
        self._listener = listener

    def onQueryStarted(self, jevent: JavaObject) -> None:
        self._listener._offer("started", lambda: from_spark_started(QueryStartedEvent.fromJObject(jevent)))

    def onQueryProgress(self, jevent: JavaObject) -> None:
        self._listener._offer("progress", partial(from_java_progress, jevent))

    def onQueryIdle(self, jevent: JavaObject) -> None:
        self._listener._offer("idle", lambda: from_spark_idle(QueryIdleEvent.fromJObject(jevent)))

    def onQueryTerminated(self, jevent: JavaObject) -> None:
        self._listener._offer("terminated", lambda: from_spark_terminated(QueryTerminatedEvent.fromJObject(jevent)))

    class Java:
        implements = ["org.apache.spark.sql.streaming.PythonStreamingQueryListener"]
