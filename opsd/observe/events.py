"""Plain, picklable query lifecycle events: what the listener hands to the recorder.

PySpark's event objects may hold references into the JVM; opsd copies the few fields it needs into
these frozen dataclasses in the listener callback (cheap attribute reads), so everything after the
queue is plain Python that tests can build by hand.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from opsd.observe.failures import exception_class
from opsd.observe.progress import BatchProgress, parse_progress, parse_timestamp

if TYPE_CHECKING:
    from py4j.java_gateway import JavaObject
    from pyspark.sql.streaming.listener import (
        QueryIdleEvent,
        QueryProgressEvent,
        QueryStartedEvent,
        QueryTerminatedEvent,
    )


@dataclass(frozen=True)
class QueryStarted:
    """A query (re)started; ``name`` is None for unnamed queries."""

    id: str
    run_id: str
    name: str | None
    timestamp: float


@dataclass(frozen=True)
class QueryProgressed:
    """A micro-batch completed."""

    progress: BatchProgress


@dataclass(frozen=True)
class QueryIdle:
    """The query is alive and waiting for data (Spark posts it instead of empty progress)."""

    id: str
    run_id: str
    timestamp: float


@dataclass(frozen=True)
class QueryTerminated:
    """The query stopped; ``exception`` is the failure text, None for a clean stop."""

    id: str
    run_id: str
    exception: str | None = None
    error_class: str | None = None

    @property
    def exception_class(self) -> str | None:
        """Simple class name of the failure, for the bounded ``exception`` metric label (`opsd.observe.failures`)."""
        return None if self.exception is None else exception_class(self.exception)


QueryEvent = QueryStarted | QueryProgressed | QueryIdle | QueryTerminated

def from_spark_started(event: QueryStartedEvent) -> QueryStarted:
    """Copy a PySpark ``QueryStartedEvent``."""
    return QueryStarted(
        id=str(event.id),
        run_id=str(event.runId),
        name=event.name,
        timestamp=parse_timestamp(event.timestamp),
    )


def from_spark_progress(event: QueryProgressEvent) -> QueryProgressed:
    """Parse ``event.progress.json`` (one JVM call; done off Spark's listener thread)."""
    return QueryProgressed(parse_progress(event.progress.json))


def from_java_progress(jevent: JavaObject) -> QueryProgressed:
    """Parse a raw Java progress event (one ``progress().json()`` call; done off Spark's listener thread)."""
    return QueryProgressed(parse_progress(jevent.progress().json()))


def from_spark_idle(event: QueryIdleEvent) -> QueryIdle:
    """Copy a PySpark ``QueryIdleEvent``."""
    return QueryIdle(
        id=str(event.id),
        run_id=str(event.runId),
        timestamp=parse_timestamp(event.timestamp),
    )


def from_spark_terminated(event: QueryTerminatedEvent) -> QueryTerminated:
    """Copy a PySpark ``QueryTerminatedEvent``."""
    return QueryTerminated(
        id=str(event.id),
        run_id=str(event.runId),
        exception=event.exception,
        error_class=event.errorClassOnException,
    )
