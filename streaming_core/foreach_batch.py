"""A `foreachBatch` function's failure as it crosses back to the JVM: short enough for Spark to read.

PySpark runs a `foreachBatch` function as a Py4J callback (`pyspark.sql.utils.ForeachBatchFunction.call`). When the
function raises, Py4J hands the JVM the whole Python traceback as text (`traceback.format_exc()`), and a
`Py4JJavaError` in it carries the JVM's full stack trace: 10 kB for a `df.write...save()` interrupted by a stop.
While a query stops, Spark asks whether its failure is the stop's own interruption with
`StreamExecution.PROXY_ERROR`, the regex
`py4j.protocol.Py4JJavaError: An error occurred while calling((.|\\r\\n|\\r|\\n)*)(java.lang.InterruptedException|...)`,
whose alternation recurses once per character. Past about 2,000 characters (measured on PySpark 4.2.1, Java 17, a
thread with the JVM's default stack) the stream execution thread dies of a `StackOverflowError` inside
`java.util.regex` instead of stopping, and the stop is not recognised.

`install_foreach_batch_guard()` (called by `streaming_core.register`) wraps that callback so that an error escaping
the function is raised again bounded, with its class and first lines kept:

- a `Py4JJavaError` becomes a `CompactJavaError`: still a `Py4JJavaError` and shown as one (so Spark's regex still
  recognises an interrupted stop, and opsd still classifies the failure), whose text is the call, the JVM
  exception and its causes (class and message, one line each), without the stack trace, at most `MAX_TEXT`
  characters;
- any other exception is raised again as it is, without the exceptions chained to it (their text would carry a
  `Py4JJavaError`'s whole stack trace into the message all the same).

The full traceback is logged first (`foreach_batch_failed`), so nothing of the diagnosis is lost.
"""

from __future__ import annotations

from typing import Any

from py4j.protocol import Py4JJavaError
from pyspark.sql.utils import ForeachBatchFunction

from .log import get_logger

log = get_logger(__name__)

#: The longest text a failed `foreachBatch` call hands the JVM: half the length at which Spark's regex overflows.
MAX_TEXT = 1000
#: Each JVM exception (the error and its causes) in one line of at most this many characters, at most this many.
LINE_CHARS = 300
MAX_CAUSES = 4


class CompactJavaError(Py4JJavaError):
    """A `Py4JJavaError` whose text is bounded (see the module docstring). It keeps the original's class name and
    module, which Spark's stop detection and opsd's failure classification read from the traceback text."""

    __module__ = Py4JJavaError.__module__
    __qualname__ = Py4JJavaError.__qualname__

    def __init__(self, error: Py4JJavaError) -> None:
        super().__init__(error.errmsg, error.java_exception)
        self.text = compact_text(error)

    def __str__(self) -> str:
        return self.text


def compact_text(error: Py4JJavaError) -> str:
    """`An error occurred while calling o71.save.` and the JVM exception with its causes, one line each, bounded."""
    lines = []
    try:
        cause, seen = error.java_exception, 0
        while cause is not None and seen < MAX_CAUSES:
            first = (str(cause.toString()).splitlines() or [""])[0]
            lines.append(("Caused by: " if seen else ": ") + first[:LINE_CHARS])
            cause, seen = cause.getCause(), seen + 1
    except Exception:  # the JVM may be gone (a stopped context): the call's own line is still worth raising
        lines.append(": (the JVM exception could not be read)")
    head = f"{error.errmsg[:LINE_CHARS]}.\n"
    return head + "\n".join(lines)[:MAX_TEXT - len(head)]


def guarded_call(self: ForeachBatchFunction, jdf: Any, batch_id: int) -> None:
    """`ForeachBatchFunction.call`, with the failure raised bounded (module docstring)."""
    try:
        _original_call(self, jdf, batch_id)
    except Py4JJavaError as e:
        log.warning("foreach_batch_failed", batch_id=batch_id, error=type(e).__name__, exc_info=True)
        raise CompactJavaError(e) from None
    except Exception as e:
        log.warning("foreach_batch_failed", batch_id=batch_id, error=type(e).__name__, exc_info=True)
        raise e from None


_original_call = ForeachBatchFunction.call


def install_foreach_batch_guard() -> None:
    """Wrap PySpark's foreachBatch callback (idempotent)."""
    ForeachBatchFunction.call = guarded_call
