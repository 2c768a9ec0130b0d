"""Plain, picklable query lifecycle events: what the listener hands to the recorder.

PySpark's event objects may hold references into the JVM; opsd copies the few fields it needs into
these frozen dataclasses in the listener callback (cheap attribute reads), so everything after the
queue is plain Python that tests can build by hand.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

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
        """Simple class name of the failure, for the bounded ``exception`` metric label."""
        return None if self.exception is None else exception_class(self.exception)


QueryEvent = QueryStarted | QueryProgressed | QueryIdle | QueryTerminated

_LEADING_CLASS = re.compile(r"^\s*([A-Za-z_$][\w$]*(?:\.[A-Za-z_$][\w$]*)*)(?::|\s*$)")
# A Python exception line inside a traceback starts at column 0: "ValueError: kaboom".
_PYTHON_EXCEPTION_LINE = re.compile(r"^([A-Za-z_][\w.]*)(?::|$)")
_PYTHON_WRAPPERS = {"PythonException", "StreamingQueryException"}
_TRACEBACK = "Traceback (most recent call last):"
# What follows a Python traceback in Spark's text: the JVM stack, the SQL state, the query description.
_END_OF_PYTHON = ("\tat ", " SQLSTATE:", "=== Streaming Query ===")
_MAX_MESSAGE = 500


def exception_class(text: str) -> str:
    """The most specific exception class named in Spark's failure text.

    Spark reports ``org.apache.spark.api.python.PythonException: ... Traceback ... ValueError: x``
    for Python failures; the Python class (``ValueError``) says more than the wrapper, so it wins
    when a traceback is present. Otherwise the leading (Java or Python) class's simple name is used,
    and ``"Unknown"`` when the text names none.
    """
    match = _LEADING_CLASS.match(text)
    leading = match.group(1).rsplit(".", 1)[-1] if match else "Unknown"
    python = python_failure(text) if leading in _PYTHON_WRAPPERS or leading == "Unknown" else None
    return python[0] if python is not None else leading


def failure_message(text: str) -> str:
    """One line that says what failed: the product's own `Class: message` from the Python traceback in Spark's
    text when there is one (it names the option, path or row at fault), else the text's first line."""
    python = python_failure(text)
    if python is not None:
        return f"{python[0]}: {python[1]}" if python[1] else python[0]
    first = text.strip().splitlines()[0] if text.strip() else ""
    return first[:_MAX_MESSAGE]


def python_failure(text: str) -> tuple[str, str] | None:
    """The last Python exception of the last traceback in `text`: (simple class name, first message line)."""
    if _TRACEBACK not in text:
        return None
    found = None
    for line in text.rsplit(_TRACEBACK, 1)[1].splitlines():
        if line.startswith(_END_OF_PYTHON):
            break
        match = _PYTHON_EXCEPTION_LINE.match(line)
        if match:
            found = (match.group(1).rsplit(".", 1)[-1], line[match.end():].strip()[:_MAX_MESSAGE])
    return found


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
